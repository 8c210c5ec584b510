import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { SESSION_LIFETIME_MS, webSignIns } from '../src/server/sign-in.ts';
import { hashToken } from '../src/store/users.ts';
import { call, type World, world } from './support/interactive.ts';
import { host, origin, request, signIn } from './support/sign-in.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

/**
 * Signing in to the web interface (issue 13): a token or a one-time link traded for the HttpOnly
 * session cookie; CSRF tokens on state-changing calls and our own Origin on WebSockets signed in by
 * the cookie; the built app served at `/`; and job origins that neither receive nor accept it.
 */

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const sleepy = { application: { name: 'file-server', version: '1.0' }, product: STANDARD_1, parameters: {} };

const jobCount = async (w: World) => (await w.store.jobs.countByState()).RUNNING ?? 0;

/** The status a WebSocket upgrade gets (101 when it opens), and the socket if it opened. */
function upgrade(
  w: World,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; socket?: WebSocket }> {
  const socket = new WebSocket(`ws://127.0.0.1:${w.port}${path}`, { headers: { host: host(w), ...headers } });
  return new Promise((resolve) => {
    socket.on('open', () => resolve({ status: 101, socket }));
    socket.on('unexpected-response', (_req, res) => resolve({ status: res.statusCode ?? 0 }));
    socket.on('error', () => resolve({ status: -1 }));
  });
}

async function runningJob(w: World): Promise<string> {
  const created = await request(w, 'POST', '/api/jobs', {
    bearer: w.tokens.alice,
    body: { items: [sleepy] },
  });
  assert.equal(created.status, 200, created.body);
  const id = (created.json().responses as { id: string }[])[0]?.id ?? '';
  await until(async () => (await w.store.jobs.get(id))?.state === 'RUNNING', { describe: 'the job runs' });
  return id;
}

describe('signing in with a token', { timeout: 60_000 }, () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('a token buys an HttpOnly, SameSite=Strict, host-only cookie; only its hash is stored', async () => {
    const answer = await request(w, 'POST', '/api/auth/session', { body: { token: w.tokens.alice } });
    assert.equal(answer.status, 200, answer.body);
    const body = answer.json();
    assert.deepEqual(body.user, { username: 'alice', admin: false, projects: [] });
    assert.match(body.csrfToken as string, /^[A-Za-z0-9_-]{43}$/);
    const cookie = answer.headers['set-cookie']?.[0] ?? '';
    assert.match(
      cookie,
      /^ucompute_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    assert.doesNotMatch(cookie, /Domain=|Secure/i);
    const secret = cookie.split(';')[0]?.split('=')[1] ?? '';
    assert.notEqual(body.csrfToken, secret);
    assert.equal((await w.store.signIns.uiSession(hashToken(secret)))?.username, 'alice');
    assert.equal(await w.store.signIns.uiSession(secret), undefined);
  });

  test('a wrong token: 401 in UCloud’s error shape and no cookie', async () => {
    const answer = await request(w, 'POST', '/api/auth/session', { body: { token: 'uc_not-a-token' } });
    assert.equal(answer.status, 401);
    assert.equal(answer.json().errorCode, 'UNAUTHORIZED');
    assert.match(answer.json().why as string, /token/);
    assert.equal(answer.headers['set-cookie'], undefined);
  });

  test('the session reads back with the cookie, and not without it', async () => {
    const { cookie, csrf } = await signIn(w);
    const again = await request(w, 'GET', '/api/auth/session', { cookie });
    assert.equal(again.status, 200);
    assert.deepEqual(again.json(), {
      user: { username: 'alice', admin: false, projects: [] },
      csrfToken: csrf,
    });
    assert.equal((await request(w, 'GET', '/api/auth/session')).status, 401);
    assert.equal(
      (await request(w, 'GET', '/api/auth/session', { cookie: 'ucompute_session=forged' })).status,
      401,
    );
  });

  test('the cookie opens the API as its user', async () => {
    const { cookie } = await signIn(w);
    const wallets = await request(w, 'GET', '/api/accounting/wallets', { cookie });
    assert.equal(wallets.status, 200, wallets.body);
    assert.equal((await request(w, 'GET', '/api/accounting/wallets')).status, 401);
  });

  test('signing out ends the session (with the CSRF token) and clears the cookie', async () => {
    const { cookie, csrf } = await signIn(w);
    const refused = await request(w, 'DELETE', '/api/auth/session', { cookie });
    assert.equal(refused.status, 403);
    assert.equal((await request(w, 'GET', '/api/auth/session', { cookie })).status, 200);
    const out = await request(w, 'DELETE', '/api/auth/session', { cookie, csrf });
    assert.equal(out.status, 204);
    assert.match(out.headers['set-cookie']?.[0] ?? '', /^ucompute_session=; .*Max-Age=0/);
    assert.equal((await request(w, 'GET', '/api/auth/session', { cookie })).status, 401);
    assert.equal((await request(w, 'GET', '/api/accounting/wallets', { cookie })).status, 401);
  });
});

describe('CSRF and Origin checks on calls signed in by the cookie', { timeout: 60_000 }, () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('a submit without X-CSRF-Token, or with another one, is refused and creates nothing', async () => {
    const { cookie, csrf } = await signIn(w);
    const before = await jobCount(w);
    const missing = await request(w, 'POST', '/api/jobs', { cookie, body: { items: [sleepy] } });
    assert.equal(missing.status, 403, missing.body);
    assert.match(missing.json().why as string, /X-CSRF-Token/);
    const other = await signIn(w);
    assert.notEqual(other.csrf, csrf);
    const wrong = await request(w, 'POST', '/api/jobs', {
      cookie,
      csrf: other.csrf,
      body: { items: [sleepy] },
    });
    assert.equal(wrong.status, 403);
    const empty = await request(w, 'POST', '/api/jobs', { cookie, csrf: '', body: { items: [sleepy] } });
    assert.equal(empty.status, 403);
    // Refused before anything is stored.
    assert.equal(await jobCount(w), before);
    assert.equal((await w.store.jobs.countByState()).IN_QUEUE ?? 0, 0);
  });

  test('with its own CSRF token the cookie submits; a bearer token needs none', async () => {
    const { cookie, csrf } = await signIn(w);
    const withCookie = await request(w, 'POST', '/api/jobs', { cookie, csrf, body: { items: [sleepy] } });
    assert.equal(withCookie.status, 200, withCookie.body);
    const withBearer = await request(w, 'POST', '/api/jobs', {
      bearer: w.tokens.bob,
      body: { items: [sleepy] },
    });
    assert.equal(withBearer.status, 200, withBearer.body);
  });

  test('a WebSocket signed in by the cookie opens from our origin only', async () => {
    const id = await runningJob(w);
    const { cookie } = await signIn(w);
    const path = `/api/jobs/follow?id=${id}`;
    const foreign = await upgrade(w, path, { cookie, origin: `http://app-${id}-0.localhost:${w.port}` });
    assert.equal(foreign.status, 403);
    assert.equal((await upgrade(w, path, { cookie })).status, 403, 'no Origin at all');
    const own = await upgrade(w, path, { cookie, origin: origin(w) });
    assert.equal(own.status, 101);
    own.socket?.close();
  });

  test('UCloud’s socket takes calls without a bearer as the signed-in user, from our origin only', async () => {
    const id = await runningJob(w);
    const { cookie } = await signIn(w);
    assert.equal((await upgrade(w, '/api/jobs', { cookie, origin: 'http://evil.example' })).status, 403);
    const own = await upgrade(w, '/api/jobs', { cookie, origin: origin(w) });
    assert.equal(own.status, 101);
    const socket = own.socket as WebSocket;
    const first = new Promise<{ type: string; payload?: { initialJob?: { id: string } } }>((resolve) =>
      socket.once('message', (data) => resolve(JSON.parse(String(data)))),
    );
    socket.send(JSON.stringify({ call: 'jobs.follow', streamId: '1', payload: { id } }));
    const message = await first;
    assert.equal(message.type, 'message', JSON.stringify(message));
    assert.equal(message.payload?.initialJob?.id, id);
    socket.close();
  });
});

describe('job origins and the interface’s cookie', { timeout: 60_000 }, () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('a job origin neither accepts the interface’s cookie nor passes it to the app', async () => {
    const id = await runningJob(w);
    const { cookie } = await signIn(w);
    const appHost = `app-${id}-0.localhost:${w.port}`;
    const refused = await request(w, 'GET', '/', { host: appHost, cookie });
    assert.equal(refused.status, 401);
    assert.equal(w.seen.length, 0);

    const opened = await request(w, 'POST', '/api/jobs/interactiveSession', {
      bearer: w.tokens.alice,
      body: { items: [{ id, rank: 0, sessionType: 'WEB' }] },
    });
    const link = new URL(
      (opened.json().responses as { session: { redirectClientTo: string } }[])[0]?.session.redirectClientTo ??
        '',
    );
    const landed = await call(w.port, { host: link.host, path: link.pathname + link.search });
    const appCookie = (landed.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
    const reached = await request(w, 'GET', '/', {
      host: appHost,
      cookie: `${appCookie}; ${cookie}; theme=dark`,
    });
    assert.equal(reached.status, 200, reached.body);
    assert.equal(w.seen.at(-1)?.headers.cookie, 'theme=dark');
  });
});

describe('the web interface at /', { timeout: 60_000 }, () => {
  let w: World;
  let root: string;
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'ucompute-web-'));
    mkdirSync(join(root, 'assets'));
    writeFileSync(
      join(root, 'index.html'),
      '<!doctype html><title>app</title><script src="/assets/app-1a2b.js"></script>',
    );
    writeFileSync(join(root, 'assets', 'app-1a2b.js'), 'console.log(1)');
    writeFileSync(join(root, 'favicon.svg'), '<svg/>');
    w = await world({ webRoot: root });
  });
  after(async () => {
    await w.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('index.html for / and every page path, never cached, with the content security policy', async () => {
    for (const path of ['/', '/jobs', '/jobs/abc123?tab=logs', '/files/home/alice']) {
      const page = await request(w, 'GET', path);
      assert.equal(page.status, 200, path);
      assert.match(page.body, /<title>app<\/title>/);
      assert.equal(page.headers['cache-control'], 'no-cache');
      const csp = String(page.headers['content-security-policy'] ?? '');
      assert.match(csp, /default-src 'self'/);
      assert.match(csp, /connect-src 'self' ws:\/\/localhost:[0-9]+ wss:\/\/localhost:[0-9]+;/);
      assert.match(csp, /img-src 'self' data:/);
      assert.match(csp, /style-src 'self' 'unsafe-inline'/);
      assert.match(csp, /frame-ancestors 'none'/);
    }
  });

  test('the app’s files as they are; hashed assets kept long', async () => {
    const asset = await request(w, 'GET', '/assets/app-1a2b.js');
    assert.equal(asset.status, 200);
    assert.equal(asset.body, 'console.log(1)');
    assert.match(asset.headers['content-type'] ?? '', /^text\/javascript/);
    assert.match(asset.headers['cache-control'] ?? '', /max-age=31536000/);
    const icon = await request(w, 'GET', '/favicon.svg');
    assert.equal(icon.headers['content-type'], 'image/svg+xml');
    assert.equal(icon.headers['cache-control'], 'no-cache');
  });

  test('the API’s own paths still answer 404, and nothing outside the app is served', async () => {
    for (const path of ['/api/nothing', '/auth/nothing', '/sessions/nothing']) {
      const answer = await request(w, 'GET', path);
      assert.equal(answer.status, 404, path);
      assert.equal(answer.json().errorCode, 'NOT_FOUND');
    }
    assert.equal((await request(w, 'POST', '/jobs')).status, 404);
    for (const path of [
      '/../../../etc/passwd',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/assets/..%2f..%2findex.html',
    ]) {
      const answer = await request(w, 'GET', path);
      assert.doesNotMatch(answer.body, /root:/, path);
    }
  });

  test('without a built app, / says how to build it', async () => {
    const bare = await world({ webRoot: join(root, 'missing') });
    try {
      const page = await request(bare, 'GET', '/');
      assert.equal(page.status, 503);
      assert.match(page.body, /scripts\/setup\.sh/);
    } finally {
      await bare.close();
    }
  });
});

test('a session slides: used within 12 hours it lasts, unused for 12 hours it has ended', async () => {
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  let now = 1_000_000;
  const signIns = webSignIns(store, () => now);
  const { secret } = await signIns.start('alice');
  now += SESSION_LIFETIME_MS - 1000;
  assert.equal((await signIns.resume(secret))?.extended, true);
  now += SESSION_LIFETIME_MS - 1000;
  assert.equal((await signIns.resume(secret))?.caller.username, 'alice');
  now += SESSION_LIFETIME_MS;
  assert.equal(await signIns.resume(secret), undefined);
  await store.close();
});
