import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Answer, call, type World, world } from './support/interactive.ts';
import { jobInState } from './support/server.ts';

/**
 * What administrators take away takes effect at once, through every way in: a revoked token, and a
 * disabled user's tokens, web interface sign-ins and open app sessions (cached in memory too).
 */

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const fileServer = {
  application: { name: 'file-server', version: '1.0' },
  product: STANDARD_1,
  parameters: {},
};

describe('revoking and disabling', { timeout: 60_000 }, () => {
  let w: World;
  let root: string;
  before(async () => {
    w = await world();
    await w.store.users.createUser('root', true);
    root = await w.store.users.createToken('root', 'admin');
  });
  after(() => w.close());

  const request = (
    method: string,
    path: string,
    o: { bearer?: string; cookie?: string; body?: unknown; host?: string } = {},
  ): Promise<Answer> =>
    call(w.port, {
      host: o.host ?? `localhost:${w.port}`,
      path,
      method,
      headers: {
        ...(o.bearer !== undefined ? { authorization: `Bearer ${o.bearer}` } : {}),
        ...(o.cookie !== undefined ? { cookie: o.cookie } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
    });
  const json = (a: Answer) => JSON.parse(a.body);
  const cookieOf = (a: Answer) => (a.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';

  test('a revoked token gets 401 from then on; the others of its user go on working', async () => {
    const second = await w.store.users.createToken('bob', 'second');
    const tokens = json(await request('GET', '/api/admin/tokens?query=second', { bearer: root }));
    const id = tokens.items[0].id as string;
    assert.equal((await request('GET', '/api/accounting/wallets', { bearer: second })).status, 200);
    const revoked = await request('POST', '/api/admin/tokens/revoke', {
      bearer: root,
      body: { items: [{ id }] },
    });
    assert.equal(revoked.status, 200, revoked.body);
    assert.equal((await request('GET', '/api/accounting/wallets', { bearer: second })).status, 401);
    assert.equal((await request('GET', '/api/accounting/wallets', { bearer: w.tokens.bob })).status, 200);
    const refused = await request('POST', '/api/admin/tokens/revoke', {
      bearer: w.tokens.bob,
      body: { items: [{ id }] },
    });
    assert.equal(refused.status, 403, 'only administrators revoke');
  });

  test("a disabled user's token, sign-in and open app session stop at once; enabled, the token works again", async () => {
    const signedIn = await request('POST', '/api/auth/session', { body: { token: w.tokens.alice } });
    const uiCookie = cookieOf(signedIn);
    const created = await request('POST', '/api/jobs', {
      bearer: w.tokens.alice,
      body: { items: [fileServer] },
    });
    const jobId = json(created).responses[0].id as string;
    await jobInState(w, jobId, 'RUNNING');
    const opened = await request('POST', '/api/jobs/interactiveSession', {
      bearer: w.tokens.alice,
      body: { items: [{ id: jobId, rank: 0, sessionType: 'WEB' }] },
    });
    const link = new URL(json(opened).responses[0].session.redirectClientTo);
    const appCookie = cookieOf(await request('GET', link.pathname + link.search, { host: link.host }));
    const app = () => request('GET', '/', { host: link.host, cookie: appCookie });
    assert.equal((await app()).status, 200, 'the app opens (and its session is now cached)');

    const disabled = await request('POST', '/api/admin/users/disable', {
      bearer: root,
      body: { items: [{ name: 'alice' }] },
    });
    assert.equal(disabled.status, 200, disabled.body);
    assert.equal((await request('GET', '/api/accounting/wallets', { bearer: w.tokens.alice })).status, 401);
    assert.equal((await request('GET', '/api/auth/session', { cookie: uiCookie })).status, 401);
    assert.equal((await app()).status, 401);
    assert.equal(
      (await request('POST', '/api/auth/session', { body: { token: w.tokens.alice } })).status,
      401,
    );

    assert.equal(
      (
        await request('POST', '/api/admin/users/enable', {
          bearer: root,
          body: { items: [{ name: 'alice' }] },
        })
      ).status,
      200,
    );
    assert.equal((await request('GET', '/api/accounting/wallets', { bearer: w.tokens.alice })).status, 200);
    const audit = json(await request('GET', '/api/admin/audit?target=user:alice', { bearer: root }));
    assert.deepEqual(
      audit.items.map((e: { action: string; actor: string }) => `${e.actor} ${e.action}`),
      ['root user.enable', 'root user.disable'],
    );
  });
});
