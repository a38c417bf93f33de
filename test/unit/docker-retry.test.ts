/**
 * Which Docker API failures are tried again (transient) and which fail at once,
 * and what a retry that gives up says. No Docker: errors are built the way
 * docker-modem builds them, and DockerRuntime talks to a fake dockerode.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Dockerode from 'dockerode';
import { DockerRuntime } from '../../src/adapters/docker.js';
import { isTransientDockerError, RetriesExhaustedError, retryTransient } from '../../src/adapters/dockerRetry.js';
import { FleetrollError } from '../../src/errors.js';

/** An error as docker-modem makes it for an HTTP answer. */
function http(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) unexpected - ${message} `), { statusCode, json: { message } });
}
/** An error as Node makes it for a socket. */
function sock(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

const fast = { minDelayMs: 1, maxDelayMs: 5 };

describe('isTransientDockerError', () => {
  const rows: [string, unknown, boolean][] = [
    ['connection reset (ECONNRESET)', sock('ECONNRESET', 'read ECONNRESET'), true],
    ['broken pipe (EPIPE)', sock('EPIPE', 'write EPIPE'), true],
    ['socket hang up without a code', new Error('socket hang up'), true],
    ['500 from a busy engine', http(500, 'context deadline exceeded'), true],
    ['502 from a proxy in front of the engine', http(502, 'Bad Gateway'), true],
    ['503 from an engine that is starting', http(503, 'Service Unavailable'), true],
    ['409 removal already in progress', http(409, 'removal of container abc is already in progress'), true],
    ['409 name already in use', http(409, 'Conflict. The container name "/web-1" is already in use by container "abc"'), false],
    [
      '409 cannot remove a running container',
      http(409, 'You cannot remove a running container abc. Stop the container before attempting removal or force remove'),
      false,
    ],
    [
      '500 port is already allocated',
      http(500, 'driver failed programming external connectivity: Bind for 0.0.0.0:80 failed: port is already allocated'),
      false,
    ],
    ['500 OCI runtime failure', http(500, 'OCI runtime create failed: exec: "nope": executable file not found in $PATH'), false],
    ['404 no such container', http(404, 'No such container: abc'), false],
    ['304 already stopped', http(304, ''), false],
    ['400 bad request', http(400, 'invalid reference format'), false],
    ['connection refused (the engine is down: ping says so)', sock('ECONNREFUSED', 'connect ECONNREFUSED /var/run/docker.sock'), false],
    ['a plain error', new Error('boom'), false],
    ['not an error at all', 'ECONNRESET', false],
    ['retries already exhausted', new RetriesExhaustedError('x', 4, sock('ECONNRESET', 'read ECONNRESET')), false],
  ];
  for (const [name, err, transient] of rows) {
    it(`${name}: ${transient ? 'transient' : 'not transient'}`, () => assert.equal(isTransientDockerError(err), transient));
  }
});

describe('retryTransient', () => {
  it('a call that fails twice with ECONNRESET, then succeeds, succeeds', async () => {
    let calls = 0;
    const result = await retryTransient(
      'stopping container web-1',
      async () => {
        calls++;
        if (calls <= 2) throw sock('ECONNRESET', 'socket hang up');
        return 'stopped';
      },
      fast,
    );
    assert.equal(result, 'stopped');
    assert.equal(calls, 3);
  });

  it('a call that always fails transiently gives up after the attempts, naming what it did and the last cause', async () => {
    let calls = 0;
    const err = await retryTransient(
      'removing container web-1',
      async (attempt) => {
        calls++;
        throw attempt < 4 ? sock('ECONNRESET', 'socket hang up') : http(503, 'engine restarting (attempt 4)');
      },
      fast,
    ).then(
      () => assert.fail('should have failed'),
      (e: unknown) => e,
    );
    assert.equal(calls, 4);
    assert.ok(err instanceof RetriesExhaustedError);
    assert.equal(err.attempts, 4);
    assert.equal(err.message, 'removing container web-1: gave up after 4 attempts; last cause: HTTP 503: engine restarting (attempt 4)');
    assert.equal((err.cause as Error).message.includes('attempt 4'), true);
  });

  it('a failure that is not transient is thrown as it is, at once', async () => {
    let calls = 0;
    const notFound = http(404, 'No such image: nope:1');
    await assert.rejects(
      retryTransient(
        'creating container web-1',
        async () => {
          calls++;
          throw notFound;
        },
        fast,
      ),
      (e: unknown) => e === notFound,
    );
    assert.equal(calls, 1);
  });
});

/** A DockerRuntime whose dockerode is `fake` (no engine is contacted). */
function runtimeWith(fake: Partial<Dockerode>): DockerRuntime {
  const rt = new DockerRuntime({ name: 'vm1', docker: 'unix:///nonexistent/docker.sock' }, { retry: fast });
  Object.defineProperty(rt, 'docker', { value: fake });
  return rt;
}

describe('DockerRuntime retries', () => {
  it('stop: two connection resets, then the stop goes through', async () => {
    let calls = 0;
    const rt = runtimeWith({
      getContainer: () =>
        ({
          stop: async () => {
            calls++;
            if (calls <= 2) throw sock('ECONNRESET', 'socket hang up');
          },
        }) as unknown as Dockerode.Container,
    });
    await rt.stop('web-1', 5);
    assert.equal(calls, 3);
  });

  it('stop: a reset, then 304 (the lost attempt did stop it) is success', async () => {
    let calls = 0;
    const rt = runtimeWith({
      getContainer: () =>
        ({
          stop: async () => {
            calls++;
            throw calls === 1 ? sock('ECONNRESET', 'socket hang up') : http(304, '');
          },
        }) as unknown as Dockerode.Container,
    });
    await rt.stop('web-1', 5);
    assert.equal(calls, 2);
  });

  it('remove: "already in progress" is waited out until the container is gone (404)', async () => {
    let calls = 0;
    const rt = runtimeWith({
      getContainer: () =>
        ({
          remove: async () => {
            calls++;
            throw calls <= 2 ? http(409, 'removal of container web-1 is already in progress') : http(404, 'No such container: web-1');
          },
        }) as unknown as Dockerode.Container,
    });
    await rt.remove('web-1');
    assert.equal(calls, 3);
  });

  const clash = () =>
    http(
      500,
      'driver failed programming external connectivity on endpoint web-1: Error starting userland proxy: listen tcp4 127.0.0.1:32783: bind: address already in use',
    );
  /** A fake engine whose first `failures` starts hit a port clash; counts starts and removals. */
  function clashingEngine(failures: number) {
    const calls = { start: 0, remove: 0 };
    const container = {
      start: async () => {
        calls.start++;
        if (calls.start <= failures) throw clash();
      },
      remove: async () => {
        calls.remove++;
      },
      inspect: async () => ({
        Id: 'c1',
        Name: '/web-1',
        State: { Running: true },
        Config: { Labels: {} },
        NetworkSettings: { Ports: { '8080/tcp': [{ HostPort: '32790' }] }, Networks: {} },
      }),
    };
    const fake = { createContainer: async () => container, getContainer: () => container } as unknown as Partial<Dockerode>;
    return { calls, rt: runtimeWith(fake) };
  }
  const spec = { name: 'web-1', image: 'app:1', env: {}, labels: {}, port: 8080, stopTimeoutSeconds: 5 };

  it('start with a port Docker picks: a clash (another process took the port) is retried, and the next start gets one', async () => {
    const { calls, rt } = clashingEngine(2);
    await rt.run({ ...spec, publishAddress: '127.0.0.1' }).catch(() => undefined); // the instance read-back may differ in the fake; the starts are what is checked
    assert.equal(calls.start, 3);
    assert.equal(calls.remove, 0);
  });

  it('start on the network only (no published port): a clash is not retried, the half-made container is removed', async () => {
    const { calls, rt } = clashingEngine(5);
    await assert.rejects(rt.run(spec), /address already in use/);
    assert.equal(calls.start, 1);
    assert.equal(calls.remove, 1);
  });

  it('stop: a 500 that persists is E_DOCKER naming the operation, the container, the host and the last cause', async () => {
    const rt = runtimeWith({
      getContainer: () =>
        ({
          stop: async () => {
            throw http(500, 'Internal Server Error');
          },
        }) as unknown as Dockerode.Container,
    });
    await assert.rejects(rt.stop('web-1', 5), (e: unknown) => {
      assert.ok(e instanceof FleetrollError);
      assert.equal(e.code, 'E_DOCKER');
      assert.match(
        e.message,
        /^stopping container web-1 on Docker host vm1 \(unix:\/\/\/nonexistent\/docker\.sock\): HTTP 500: Internal Server Error; gave up after 4 attempts$/,
      );
      assert.ok(e.cause instanceof RetriesExhaustedError);
      return true;
    });
  });
});
