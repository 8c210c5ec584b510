import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { interactiveSessions } from '../src/interactive/sessions.ts';
import { hashToken } from '../src/store/users.ts';
import { env } from './support/fixtures.ts';
import { call, runningJob, type World, world } from './support/interactive.ts';
import { until } from './support/until.ts';

/**
 * Interactive sessions and the web proxy end to end on a loopback port: who may open what, the
 * one-time link traded for a cookie on the job's own origin, and every way in without a session.
 */

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const fileServer = {
  application: { name: 'file-server', version: '1.0' },
  product: STANDARD_1,
  parameters: {},
};
const desktop = { application: { name: 'desktop', version: '1.0' }, product: STANDARD_1, parameters: {} };

async function api(w: World, who: 'alice' | 'bob', path: string, body: unknown) {
  const answer = await call(w.port, {
    host: `localhost:${w.port}`,
    path,
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens[who]}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: answer.status, json: JSON.parse(answer.body) };
}

const openSession = (w: World, id: string, sessionType: string, rank = 0, who: 'alice' | 'bob' = 'alice') =>
  api(w, who, '/api/jobs/interactiveSession', { items: [{ id, rank, sessionType }] });

/** The app's host for a job and rank, as the browser would send it. */
const appHost = (w: World, id: string, rank = 0) => `app-${id}-${rank}.localhost:${w.port}`;

/** The status a WebSocket upgrade at `host` gets: 101 when it opens. */
function upgradeStatus(w: World, host: string, cookie?: string): Promise<number> {
  const socket = new WebSocket(`ws://127.0.0.1:${w.port}/api/kernels/1/channels`, {
    headers: { host, ...(cookie !== undefined ? { cookie } : {}) },
  });
  return new Promise((resolve) => {
    socket.on('open', () => {
      socket.close();
      resolve(101);
    });
    socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.on('error', () => resolve(-1));
  });
}

/** Opens a web session and trades its link for the cookie, as the browser does. */
async function signIn(w: World, id: string, rank = 0): Promise<{ cookie: string; ticket: string }> {
  const opened = await openSession(w, id, 'WEB', rank);
  assert.equal(opened.status, 200, JSON.stringify(opened.json));
  const link = new URL(opened.json.responses[0].session.redirectClientTo);
  const landed = await call(w.port, { host: link.host, path: link.pathname + link.search });
  assert.equal(landed.status, 303);
  const setCookie = landed.headers['set-cookie']?.[0] ?? '';
  return { cookie: setCookie.split(';')[0] ?? '', ticket: link.searchParams.get('ticket') ?? '' };
}

describe('opening sessions', { timeout: 60_000 }, () => {
  let w: World;
  let web: string;
  let vnc: string;
  before(async () => {
    w = await world();
    web = await runningJob(w, fileServer);
    vnc = await runningJob(w, desktop);
  });
  after(() => w.close());

  test('a web session is a one-time link to the job’s own origin', async () => {
    const opened = await openSession(w, web, 'WEB');
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    const [response] = opened.json.responses;
    assert.equal(response.providerId, 'ucompute');
    assert.equal(response.providerDomain, `http://localhost:${w.port}`);
    assert.equal(response.session.type, 'web');
    assert.equal(response.session.jobId, web);
    assert.equal(response.session.rank, 0);
    const link = new URL(response.session.redirectClientTo);
    assert.equal(link.host, appHost(w, web));
    assert.equal(link.pathname, '/_ucompute/authorize');
    const ticket = link.searchParams.get('ticket') ?? '';
    assert.ok(Buffer.from(ticket, 'base64url').length >= 16, 'at least 128 random bits');
    // Only the hash is stored.
    assert.equal((await w.store.sessions.get(hashToken(ticket)))?.kind, 'TICKET');
    assert.equal(await w.store.sessions.get(ticket), undefined);
  });

  test('a VNC session is a page on the API origin with the secret in the fragment', async () => {
    const opened = await openSession(w, vnc, 'VNC');
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    const session = opened.json.responses[0].session;
    assert.equal(session.type, 'vnc');
    const url = new URL(session.url);
    assert.equal(url.origin, `http://localhost:${w.port}`);
    assert.equal((await w.store.sessions.get(hashToken(url.hash.slice(1))))?.kind, 'VNC');
  });

  test('every running job offers a shell session', async () => {
    for (const id of [web, vnc]) {
      const opened = await openSession(w, id, 'SHELL');
      assert.equal(opened.status, 200, JSON.stringify(opened.json));
      const session = opened.json.responses[0].session;
      assert.equal(session.type, 'shell');
      assert.equal((await w.store.sessions.get(hashToken(session.sessionIdentifier)))?.kind, 'SHELL');
    }
  });

  test('only the session types the application offers', async () => {
    const vncOfWeb = await openSession(w, web, 'VNC');
    assert.equal(vncOfWeb.status, 400);
    assert.match(vncOfWeb.json.message, /sessionType/);
    assert.equal((await openSession(w, vnc, 'WEB')).status, 400);
  });

  test('only ranks the job has', async () => {
    const answer = await openSession(w, web, 'WEB', 1);
    assert.equal(answer.status, 400);
    assert.match(answer.json.message, /rank/);
  });

  test('another user cannot open a session on someone else’s job', async () => {
    for (const type of ['WEB', 'SHELL']) {
      const answer = await openSession(w, web, type, 0, 'bob');
      assert.equal(answer.status, 404, `${type}: ${JSON.stringify(answer.json)}`);
    }
  });

  test('only a running job', async () => {
    const id = await runningJob(w, fileServer);
    await w.service.terminate({ username: 'alice', admin: false }, [id]);
    const answer = await openSession(w, id, 'WEB');
    assert.equal(answer.status, 409);
    assert.match(answer.json.message, /not RUNNING/);
  });
});

describe('the web proxy', { timeout: 60_000 }, () => {
  let w: World;
  let a: string;
  let b: string;
  before(async () => {
    w = await world({ revocation: false });
    a = await runningJob(w, fileServer);
    b = await runningJob(w, fileServer);
  });
  after(() => w.close());

  test('without a cookie: a page saying how to open the app, and nothing reaches it', async () => {
    const before = w.seen.length;
    const answer = await call(w.port, { host: appHost(w, a), path: '/tree' });
    assert.equal(answer.status, 401);
    assert.match(answer.body, new RegExp(`ucompute open ${a} --rank 0`));
    assert.equal(w.seen.length, before);
  });

  test('the link sets a host-only HttpOnly SameSite=Lax cookie, redirects away, and works once', async () => {
    const opened = await openSession(w, a, 'WEB');
    const link = new URL(opened.json.responses[0].session.redirectClientTo);
    const landed = await call(w.port, { host: link.host, path: link.pathname + link.search });
    assert.equal(landed.status, 303);
    assert.equal(landed.headers.location, '/');
    const cookie = landed.headers['set-cookie']?.[0] ?? '';
    assert.match(cookie, /^ucompute-session=[A-Za-z0-9_-]{43}; /);
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Lax/);
    assert.doesNotMatch(cookie, /Domain=/i);
    const again = await call(w.port, { host: link.host, path: link.pathname + link.search });
    assert.equal(again.status, 403);
    assert.equal(again.headers['set-cookie'], undefined);
  });

  test('a link for job A does not sign in at job B’s origin', async () => {
    const opened = await openSession(w, a, 'WEB');
    const link = new URL(opened.json.responses[0].session.redirectClientTo);
    const landed = await call(w.port, { host: appHost(w, b), path: link.pathname + link.search });
    assert.equal(landed.status, 403);
  });

  test('with the cookie: forwarded without our cookie or Authorization, with X-Forwarded-*', async () => {
    const { cookie } = await signIn(w, a);
    const answer = await call(w.port, {
      host: appHost(w, a),
      path: '/api/contents?x=1',
      headers: { cookie: `theme=dark; ${cookie}; _xsrf=abc`, authorization: 'Bearer platform-token' },
    });
    assert.equal(answer.status, 200, answer.body);
    const seen = JSON.parse(answer.body);
    assert.equal(seen.url, '/api/contents?x=1');
    assert.equal(seen.headers.cookie, 'theme=dark; _xsrf=abc');
    assert.equal(seen.headers.authorization, undefined);
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
    assert.equal(seen.headers['x-forwarded-host'], appHost(w, a));
    assert.equal(seen.headers.host, appHost(w, a));
    assert.deepEqual(answer.headers['set-cookie'], ['app=1; Path=/']);
  });

  test('job A’s cookie at job B’s origin is denied', async () => {
    const { cookie } = await signIn(w, a);
    const answer = await call(w.port, { host: appHost(w, b), path: '/', headers: { cookie } });
    assert.equal(answer.status, 401);
  });

  test('a session for rank 0 does not open rank 1', async () => {
    const { cookie } = await signIn(w, a);
    const answer = await call(w.port, { host: appHost(w, a, 1), path: '/', headers: { cookie } });
    assert.equal(answer.status, 401);
  });

  test('an expired session is denied', async () => {
    const { cookie } = await signIn(w, a);
    const hash = hashToken(cookie.split('=')[1] ?? '');
    const session = await w.store.sessions.get(hash);
    assert.ok(session);
    await w.store.sessions.touch(hash, session.lastUsedAt, Date.now() - 1);
    const answer = await call(w.port, { host: appHost(w, a), path: '/', headers: { cookie } });
    assert.equal(answer.status, 401);
  });

  test('use is recorded and extends the session', async () => {
    const { cookie } = await signIn(w, a);
    const hash = hashToken(cookie.split('=')[1] ?? '');
    const old = Date.now() - 3_600_000;
    await w.store.sessions.touch(hash, old, old + 1000 * 3_600_000);
    await call(w.port, { host: appHost(w, a), path: '/', headers: { cookie } });
    // Written with the other sessions' use every few seconds, not on each request.
    const session = await until(
      async () => {
        const now = await w.store.sessions.get(hash);
        return now && now.lastUsedAt > old && now;
      },
      { describe: 'the use is written', timeout: 30_000, every: 100 },
    );
    assert.ok(session.expiresAt >= session.lastUsedAt + 10 * 3_600_000 - 1000);
  });

  test('encoded path tricks: resolved before deciding, or refused', async () => {
    const { cookie } = await signIn(w, a);
    const tricks: [string, number, string?][] = [
      ['/a/%2e%2e/%2E%2E/b', 200, '/b'],
      ['/a/../../b', 200, '/b'],
      ['//b//c', 200, '/b/c'],
      ['/..%2f..%2fetc/passwd', 400],
      ['/a%5c..%5cb', 400],
      ['/a\\..\\b', 400],
    ];
    for (const [path, status, upstream] of tricks) {
      const answer = await call(w.port, { host: appHost(w, a), path, headers: { cookie } });
      assert.equal(answer.status, status, path);
      if (upstream !== undefined) assert.equal(JSON.parse(answer.body).url, upstream, path);
    }
    // The authorize path cannot be reached sideways to replay or plant a ticket.
    const sideways = await call(w.port, {
      host: appHost(w, a),
      path: '/x/..%2F_ucompute/authorize?ticket=x',
    });
    assert.equal(sideways.status, 400);
    const dotted = await call(w.port, {
      host: appHost(w, a),
      path: '/x/%2e%2e/_ucompute/authorize?ticket=x',
    });
    assert.equal(dotted.status, 403);
  });

  test('large uploads stream through', async () => {
    const { cookie } = await signIn(w, a);
    const body = Buffer.alloc(32 * 1024 * 1024, 7);
    const answer = await call(w.port, {
      host: appHost(w, a),
      path: '/upload',
      method: 'POST',
      headers: { cookie },
      body,
    });
    assert.equal(answer.status, 200);
    assert.equal(JSON.parse(answer.body).bytes, body.length);
  });

  test('Expect: 100-continue: the browser is asked for the body, the app gets it', async () => {
    const { cookie } = await signIn(w, a);
    const headers = { host: appHost(w, a), cookie, expect: '100-continue', 'content-length': '5' };
    const req = request({ host: '127.0.0.1', port: w.port, method: 'POST', path: '/upload', headers });
    req.on('continue', () => req.end('hello'));
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    assert.equal(res.statusCode, 200);
    assert.equal(JSON.parse(Buffer.concat(chunks).toString()).bytes, 5);
  });

  test('server-sent events arrive as they are sent', async () => {
    const { cookie } = await signIn(w, a);
    const first = await new Promise<{ chunk: string; ended: boolean }>((resolve, reject) => {
      import('node:http').then(({ request }) => {
        const req = request(
          { host: '127.0.0.1', port: w.port, path: '/events', headers: { cookie, host: appHost(w, a) } },
          (res) => {
            let ended = false;
            res.on('end', () => {
              ended = true;
            });
            res.once('data', (c: Buffer) => {
              resolve({ chunk: c.toString(), ended });
              res.resume();
            });
          },
        );
        req.on('error', reject);
        req.end();
      }, reject);
    });
    assert.equal(first.chunk, 'data: first\n\n');
    assert.equal(first.ended, false);
  });

  test('WebSockets: refused without a session, relayed with one', async () => {
    assert.equal(await upgradeStatus(w, appHost(w, a)), 401);
    const { cookie } = await signIn(w, a);
    const other = await signIn(w, b);
    assert.equal(await upgradeStatus(w, appHost(w, a), other.cookie), 401);
    assert.equal(await upgradeStatus(w, appHost(w, a, 1), cookie), 401);

    const socket = new WebSocket(`ws://127.0.0.1:${w.port}/api/kernels/1/channels`, {
      headers: { host: appHost(w, a), cookie },
    });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    socket.send('1+1');
    const echo = await new Promise<string>((resolve) =>
      socket.once('message', (data) => resolve(String(data))),
    );
    assert.equal(echo, '1+1');
    socket.close();
    const seen = w.seen.findLast((s) => s.method === 'WEBSOCKET');
    assert.equal(seen?.headers.cookie, undefined);
  });

  test('an ended job’s session is denied', async () => {
    const id = await runningJob(w, fileServer);
    const { cookie } = await signIn(w, id);
    assert.equal((await call(w.port, { host: appHost(w, id), path: '/', headers: { cookie } })).status, 200);
    await w.service.terminate({ username: 'alice', admin: false }, [id]);
    await until(async () => (await w.store.jobs.get(id))?.state !== 'RUNNING', { describe: 'the job ends' });
    assert.equal((await call(w.port, { host: appHost(w, id), path: '/', headers: { cookie } })).status, 401);
  });

  test('no secret appears in any log line', async () => {
    const { cookie, ticket } = await signIn(w, a);
    await call(w.port, { host: appHost(w, a), path: '/', headers: { cookie } });
    const secret = cookie.split('=')[1] ?? '';
    assert.ok(w.logLines.length > 0);
    for (const line of w.logLines) {
      assert.ok(!line.includes(ticket) && !line.includes(secret), line);
    }
  });
});

describe('revocation', { timeout: 60_000 }, () => {
  test('a job’s sessions are deleted when it ends', async () => {
    const w = await world();
    try {
      const id = await runningJob(w, fileServer);
      const opened = await openSession(w, id, 'SHELL');
      const hash = hashToken(opened.json.responses[0].session.sessionIdentifier);
      assert.ok(await w.store.sessions.get(hash));
      await w.service.terminate({ username: 'alice', admin: false }, [id]);
      await until(async () => (await w.store.sessions.get(hash)) === undefined, {
        describe: 'the session is deleted',
      });
    } finally {
      await w.close();
    }
  });
});

describe('sessions in use', { timeout: 60_000 }, () => {
  const HOUR = 3_600_000;
  const alice = { username: 'alice', admin: false };
  const reached = { protocol: 'http', origin: 'http://localhost:1', portSuffix: ':1' } as const;

  /** A web session's secret on a running job, with sessions on a clock the test moves. */
  async function webSession(w: World, clock: { now: number }) {
    const id = await runningJob(w, fileServer);
    const sessions = interactiveSessions({
      store: w.store,
      env: env(),
      service: w.service,
      now: () => clock.now,
    });
    const [opened] = await sessions.open(alice, [{ id, rank: 0, sessionType: 'WEB' }], reached);
    assert.equal(opened?.type, 'web');
    const ticket = new URL(opened.type === 'web' ? opened.redirectClientTo : '').searchParams.get('ticket');
    const secret = await sessions.trade(ticket ?? '', id, 0);
    assert.ok(secret);
    return { id, sessions, secret };
  }

  test('a session kept in memory expires when its time is up', async () => {
    const w = await world();
    const clock = { now: Date.now() };
    const { id, sessions, secret } = await webSession(w, clock);
    try {
      assert.ok(await sessions.use(secret, 'WEB', id, 0));
      clock.now += 10 * HOUR + 1;
      assert.equal(await sessions.use(secret, 'WEB', id, 0), undefined);
    } finally {
      await sessions.close();
      await w.close();
    }
  });

  test('its last use and extended expiry reach the store (at the latest at close)', async () => {
    const w = await world();
    const clock = { now: Date.now() };
    const { id, sessions, secret } = await webSession(w, clock);
    try {
      assert.ok(await sessions.use(secret, 'WEB', id, 0));
      clock.now += HOUR;
      assert.ok(await sessions.use(secret, 'WEB', id, 0));
    } finally {
      await sessions.close();
    }
    const stored = await w.store.sessions.get(hashToken(secret));
    await w.close();
    assert.equal(stored?.lastUsedAt, clock.now);
    assert.equal(stored?.expiresAt, clock.now + 10 * HOUR);
  });

  test('connections to a job’s app close when the job ends', async () => {
    const sockets: Socket[] = [];
    const w = await world({
      backend: (port) => ({
        connect: async () => {
          const socket = connect(port, '127.0.0.1');
          await once(socket, 'connect');
          sockets.push(socket);
          return socket;
        },
      }),
    });
    try {
      const id = await runningJob(w, fileServer);
      const { cookie } = await signIn(w, id);
      assert.equal(
        (await call(w.port, { host: appHost(w, id), path: '/', headers: { cookie } })).status,
        200,
      );
      assert.equal(sockets.length, 1);
      assert.equal(sockets[0]?.destroyed, false);
      await w.service.terminate(alice, [id]);
      // Kept alive, the app's connection would stay open for undici's keep-alive time (4 s): the
      // wait must end before that, or the test could not fail.
      await until(() => sockets.every((s) => s.destroyed), {
        describe: "the app's connections are closed before their keep-alive time",
        timeout: 3_000,
      });
    } finally {
      await w.close();
    }
  });
});
