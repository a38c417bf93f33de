/**
 * Manual smoke check for the registry-free images (run as root after scripts/setup-host.sh):
 *
 *   npx tsx scripts/smoke-images.ts            # build (if needed), run, check, clean up
 *   KEEP=1 npx tsx scripts/smoke-images.ts     # leave the containers running for a look
 *
 * Builds the node/nginx base images and fleetroll-example:1.0.0 / :1.1.0, starts two app
 * containers (--init) on a user-defined network and an nginx container proxying to them
 * (published on 127.0.0.1 only), checks /api/version through nginx, a config test +
 * reload, and that `docker stop` of an app container is graceful (exit 0, quickly, no
 * failed requests through nginx while it stops). Everything it creates carries the label
 * fleetroll.test=smoke and is removed by that label; images are kept for reuse.
 */
import { mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../src/adapters/localImages.js';

const LABEL = 'fleetroll.test=smoke';
const NET = 'fleetroll-smoke-net';
const APPS = [
  { name: 'fleetroll-smoke-app-1', version: '1.0.0' },
  { name: 'fleetroll-smoke-app-2', version: '1.1.0' },
];
const LB = 'fleetroll-smoke-nginx';

const t0 = Date.now();
const say = (msg: string) => console.log(`[smoke +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
let failures = 0;
function check(ok: boolean, what: string): void {
  if (ok) say(`ok   ${what}`);
  else {
    failures++;
    say(`FAIL ${what}`);
  }
}

async function docker(args: string[], reject = true) {
  const r = await execa('docker', args, { reject: false, stdin: 'ignore' });
  if (reject && r.exitCode !== 0) throw new Error(`docker ${args.join(' ')} exited ${r.exitCode}: ${String(r.stderr).trim()}`);
  return { stdout: String(r.stdout).trim(), stderr: String(r.stderr).trim(), code: r.exitCode ?? -1 };
}

async function cleanup(): Promise<void> {
  const ids = (await docker(['ps', '-aq', '--filter', `label=${LABEL}`])).stdout.split('\n').filter(Boolean);
  if (ids.length) await docker(['rm', '-f', '-v', ...ids]);
  const nets = (await docker(['network', 'ls', '-q', '--filter', `label=${LABEL}`])).stdout.split('\n').filter(Boolean);
  if (nets.length) await docker(['network', 'rm', ...nets]);
  if (ids.length || nets.length) say(`removed ${ids.length} container(s), ${nets.length} network(s) labelled ${LABEL}`);
}

async function imageSize(tag: string): Promise<string> {
  const bytes = Number((await docker(['image', 'inspect', '--format', '{{.Size}}', tag])).stdout);
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

async function get(url: string, timeoutMs = 2000): Promise<{ status: number; body: string; version: string | null }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: await res.text(), version: res.headers.get('x-app-version') };
}

async function waitFor(what: string, fn: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  const log = (line: string) => say(`  ${line}`);

  // 1. images
  let t = Date.now();
  const nodeBase = await ensureNodeBaseImage({ log });
  say(`node base ${nodeBase}: ${Date.now() - t} ms, ${await imageSize(nodeBase)}`);
  t = Date.now();
  const nginxBase = await ensureNginxBaseImage({ log });
  say(`nginx base ${nginxBase}: ${Date.now() - t} ms, ${await imageSize(nginxBase)}`);
  for (const a of APPS) {
    t = Date.now();
    const tag = await buildAppImage({ version: a.version, base: nodeBase, log });
    say(`app ${tag}: ${Date.now() - t} ms, ${await imageSize(tag)}`);
  }

  // 2. containers
  await cleanup();
  await docker(['network', 'create', '--label', LABEL, NET]);
  for (const a of APPS) {
    await docker([
      'run', '-d', '--init', '--name', a.name, '--label', LABEL, '--network', NET,
      '--env', 'PRESTOP_SECONDS=1', '--env', 'ORDER_DELAY_MS=50',
      `fleetroll-example:${a.version}`,
    ]);
  }
  const ips: string[] = [];
  for (const a of APPS) {
    const ip = (await docker(['inspect', '--format', `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, a.name])).stdout;
    ips.push(ip);
    await waitFor(`${a.name} ready`, async () => (await get(`http://${ip}:8080/health/ready`)).status === 200);
    const v = await get(`http://${ip}:8080/api/version`);
    check(v.body === a.version && v.version === a.version, `${a.name} direct /api/version = ${JSON.stringify(v.body)}, X-App-Version ${v.version}`);
  }
  const user = (await docker(['inspect', '--format', '{{.Config.User}}', APPS[0]!.name])).stdout;
  check(user === '1000:1000', `app runs as non-root user (${user})`);

  const confDir = await mkdtemp(path.join(os.tmpdir(), 'fleetroll-smoke-'));
  try {
    const conf = path.join(confDir, 'smoke.conf');
    await writeFile(
      conf,
      `upstream bookstore_api {\n${ips.map((ip) => `  server ${ip}:8080 max_fails=1 fail_timeout=2s;`).join('\n')}\n  keepalive 16;\n}\n` +
        `server {\n  listen 80;\n  location / {\n    proxy_pass http://bookstore_api;\n    proxy_http_version 1.1;\n` +
        `    proxy_set_header Connection "";\n    proxy_next_upstream error timeout http_502 http_503 non_idempotent;\n` +
        `    proxy_connect_timeout 1s;\n  }\n}\n`,
    );
    await chmod(confDir, 0o755);
    await chmod(conf, 0o644);
    await docker([
      'run', '-d', '--name', LB, '--label', LABEL, '--network', NET,
      '--publish', '127.0.0.1::80', '--volume', `${conf}:/etc/nginx/conf.d/smoke.conf:ro`, nginxBase,
    ]);
    const port = (await docker(['port', LB, '80/tcp'])).stdout.split('\n')[0]!.split(':').pop();
    const base = `http://127.0.0.1:${port}`;
    await waitFor('nginx answering', async () => (await get(`${base}/api/version`)).status === 200);

    // 3. traffic through nginx
    const seen = new Map<string, number>();
    for (let i = 0; i < 20; i++) {
      const r = await get(`${base}/api/version`);
      if (r.status !== 200 || r.body !== r.version) failures++;
      seen.set(r.body, (seen.get(r.body) ?? 0) + 1);
    }
    check(seen.get('1.0.0')! > 0 && seen.get('1.1.0')! > 0, `nginx ${base} round-robins: ${JSON.stringify(Object.fromEntries(seen))}`);
    const books = await get(`${base}/api/books`);
    check(books.status === 200 && (JSON.parse(books.body) as unknown[]).length === 3, 'GET /api/books through nginx');
    const order = await fetch(`${base}/api/orders`, { method: 'POST', body: '{"bookId":1}', headers: { 'content-type': 'application/json' } });
    check(order.status === 201, `POST /api/orders through nginx -> ${order.status}`);
    const test = await docker(['exec', LB, 'nginx', '-t'], false);
    check(test.code === 0, `nginx -t in the container (${test.stderr.split('\n').pop()})`);
    const reload = await docker(['exec', LB, 'nginx', '-s', 'reload'], false);
    check(reload.code === 0, 'nginx -s reload in the container');

    // 4. graceful stop under light load through nginx
    let stop = true;
    let sent = 0;
    let bad = 0;
    const load = (async () => {
      while (stop) {
        sent++;
        try {
          const r = await get(`${base}/api/version`);
          if (r.status !== 200) bad++;
        } catch {
          bad++;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const victim = APPS[0]!.name;
    t = Date.now();
    const stopped = await docker(['stop', '--time', '10', victim], false);
    const stopMs = Date.now() - t;
    stop = false;
    await load;
    const exit = (await docker(['inspect', '--format', '{{.State.ExitCode}}', victim])).stdout;
    check(stopped.code === 0 && exit === '0' && stopMs < 5000, `docker stop ${victim}: ${stopMs} ms, exit code ${exit}`);
    check(bad === 0, `requests through nginx while it stopped: ${sent} sent, ${bad} failed`);
    const logs = await docker(['logs', victim]);
    say(`  ${victim} log:\n${logs.stdout.split('\n').map((l) => '      ' + l).join('\n')}`);
  } finally {
    if (!process.env.KEEP) {
      await cleanup();
      await rm(confDir, { recursive: true, force: true });
    }
  }
}

main()
  .catch(async (err: unknown) => {
    failures++;
    say(`ERROR ${err instanceof Error ? err.message : String(err)}`);
    if (!process.env.KEEP) await cleanup().catch(() => {});
  })
  .finally(() => {
    say(failures === 0 ? 'PASS' : `FAILED (${failures})`);
    process.exitCode = failures === 0 ? 0 : 1;
  });
