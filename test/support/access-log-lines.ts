/** Test helper shared by the access log tests: fleetroll_json lines as nginx writes them. */

/** A fleetroll_json line with nginx's spelling of each field; `over` replaces fields. */
export function line(over: Record<string, unknown> = {}): string {
  return JSON.stringify({
    fleetroll: 1,
    time: '1712345678.123',
    status: '200',
    method: 'GET',
    uri: '/api/books',
    request_time: '0.004',
    upstream_addr: '10.0.0.2:8080',
    upstream_status: '200',
    upstream_response_time: '0.003',
    upstream_header_time: '0.002',
    app_version: '1.0.0',
    key: '192.0.2.7',
    ...over,
  });
}
