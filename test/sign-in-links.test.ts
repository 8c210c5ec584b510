import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashToken } from '../src/store/users.ts';
import type { Answer, World } from './support/interactive.ts';
import { runningJob, world } from './support/interactive.ts';
import { origin, request, setCookie, signIn } from './support/sign-in.ts';

/**
 * One-time sign-in links (`ucompute web`) and the session cookie, attacked as the audit did
 * (issue 18): a link opened by someone else's browser, a form posted from another site, a
 * second session cookie tossed by a sibling origin, and links built from a forged `Host`.
 */

const NONCE_COOKIE = 'ucompute_link';
const FILE_SERVER = {
  application: { name: 'file-server', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: {},
};

/** The form of a link's confirmation page: its ticket and nonce, and the nonce cookie it set. */
function confirmation(page: Answer): { ticket: string; nonce: string; cookie: string } {
  const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.body)?.[1];
  const cookie = setCookie(page, NONCE_COOKIE);
  assert.ok(cookie, `the page sets its nonce cookie: ${page.headers['set-cookie']}`);
  return { ticket: field('ticket') ?? '', nonce: field('nonce') ?? '', cookie };
}

async function newLink(w: World, who: 'alice' | 'bob' = 'alice', host?: string): Promise<URL> {
  const made = await request(w, 'POST', '/api/auth/links', {
    bearer: w.tokens[who],
    ...(host !== undefined ? { host } : {}),
  });
  assert.equal(made.status, 200, made.body);
  return new URL(made.json().url as string);
}

/** Who the browser holding `cookie` is signed in as (undefined when it is not). */
async function whoIs(w: World, cookie: string): Promise<string | undefined> {
  const session = await request(w, 'GET', '/api/auth/session', { cookie });
  return session.status === 200 ? (session.json().user as { username: string }).username : undefined;
}

describe('one-time sign-in links', { timeout: 60_000 }, () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('a link opens a page that asks; its POST, from that page, signs in once', async () => {
    const startedAt = Date.now();
    const made = await request(w, 'POST', '/api/auth/links', { bearer: w.tokens.alice });
    const url = new URL(made.json().url as string);
    const expiresAt = made.json().expiresAt as number;
    assert.equal(url.origin, origin(w));
    assert.equal(url.pathname, '/auth/link');
    assert.ok(Buffer.from(url.searchParams.get('ticket') ?? '', 'base64url').length >= 32);
    assert.ok(expiresAt >= startedAt + 120_000 && expiresAt <= Date.now() + 120_000);

    const page = await request(w, 'GET', url.pathname + url.search);
    assert.equal(page.status, 200, page.body);
    assert.match(page.body, /Sign in to ucompute as alice\?/);
    assert.match(page.body, /<form method="post" action="\/auth\/link">/);
    assert.equal(setCookie(page, 'ucompute_session'), undefined, 'opening the link signs nobody in');
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.equal(page.headers['referrer-policy'], 'same-origin');
    const form = confirmation(page);
    assert.equal(form.ticket, url.searchParams.get('ticket'));
    assert.match(page.headers['set-cookie']?.join() ?? '', /HttpOnly; SameSite=Strict; Max-Age=120/);

    const posted = await request(w, 'POST', '/auth/link', {
      cookie: form.cookie,
      origin: origin(w),
      form: { ticket: form.ticket, nonce: form.nonce },
    });
    assert.equal(posted.status, 303, posted.body);
    assert.equal(posted.headers.location, '/');
    const cookie = setCookie(posted, 'ucompute_session') ?? '';
    assert.equal(await whoIs(w, cookie), 'alice');
    assert.equal(setCookie(posted, NONCE_COOKIE), `${NONCE_COOKIE}=`, 'the nonce cookie is cleared');

    const again = await request(w, 'GET', url.pathname + url.search);
    assert.equal(again.status, 410);
    assert.equal(again.headers['set-cookie'], undefined);
    assert.match(again.body, /ucompute web/);
    const twice = await request(w, 'POST', '/auth/link', {
      cookie: form.cookie,
      origin: origin(w),
      form: { ticket: form.ticket, nonce: form.nonce },
    });
    assert.equal(twice.status, 410);
    assert.equal(twice.headers['set-cookie'], undefined);
  });

  test('an expired link is refused, on its page and by its POST (and used up)', async () => {
    const ticket = 'an-expired-link-secret-of-enough-length-00000';
    await w.store.signIns.insertLink(hashToken(ticket), 'alice', Date.now() - 1);
    const page = await request(w, 'GET', `/auth/link?ticket=${ticket}`);
    assert.equal(page.status, 410);
    assert.equal(page.headers['set-cookie'], undefined);
    const fresh = await newLink(w);
    const form = confirmation(await request(w, 'GET', fresh.pathname + fresh.search));
    const posted = await request(w, 'POST', '/auth/link', {
      cookie: form.cookie,
      origin: origin(w),
      form: { ticket, nonce: form.nonce },
    });
    assert.equal(posted.status, 410);
    assert.equal(setCookie(posted, 'ucompute_session'), undefined);
    assert.equal(await w.store.signIns.takeLink(hashToken(ticket)), undefined);
  });

  test('no link without a token or session', async () => {
    assert.equal((await request(w, 'POST', '/api/auth/links')).status, 401);
    const bare = await request(w, 'GET', '/auth/link');
    assert.equal(bare.status, 410);
    assert.equal(bare.headers['set-cookie'], undefined);
    const { cookie } = await signIn(w);
    assert.equal((await request(w, 'POST', '/api/auth/links', { cookie })).status, 403, 'CSRF applies');
  });

  test('the link is built from the public URL, never from the Host a request names', async () => {
    const url = await newLink(w, 'alice', 'evil.example');
    assert.equal(url.origin, origin(w));
  });

  test('the secrets never appear in a log line', async () => {
    const url = await newLink(w);
    const ticket = url.searchParams.get('ticket') ?? '';
    const form = confirmation(await request(w, 'GET', url.pathname + url.search));
    const posted = await request(w, 'POST', '/auth/link', {
      cookie: form.cookie,
      origin: origin(w),
      form: { ticket: form.ticket, nonce: form.nonce },
    });
    const secret = setCookie(posted, 'ucompute_session')?.split('=')[1] ?? '';
    assert.ok(secret.length > 0);
    await request(w, 'GET', url.pathname + url.search);
    assert.ok(
      w.logLines.some((line) => line.includes('/auth/link')),
      'the requests were logged',
    );
    for (const line of w.logLines) {
      for (const hidden of [ticket, secret, form.nonce]) {
        assert.ok(!line.includes(hidden), `a secret in: ${line}`);
      }
    }
  });
});

describe('session fixation', { timeout: 60_000 }, () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test("by link: the attacker's link, opened in the victim's browser, signs it in as nobody else", async () => {
    const victim = await signIn(w, 'bob');
    const link = await newLink(w, 'alice');
    // Following the link (a chat preview, a mail scanner, a prefetch, the victim's own click).
    const page = await request(w, 'GET', link.pathname + link.search, { cookie: victim.cookie });
    assert.equal(page.status, 200);
    assert.equal(setCookie(page, 'ucompute_session'), undefined);
    assert.match(page.body, /signed in as <strong>bob<\/strong>: signing in as alice signs bob out here/);
    assert.equal(await whoIs(w, victim.cookie), 'bob');

    // The attacker's own page posts the form: it has the ticket and a nonce of its own page, but
    // not the victim's nonce cookie (SameSite=Strict), nor our Origin.
    const attackersPage = confirmation(await request(w, 'GET', link.pathname + link.search));
    const both = `${victim.cookie}; ${attackersPage.cookie}`;
    const { nonce } = attackersPage;
    const attempts: { why: string; cookie: string; origin?: string; nonce: string }[] = [
      { why: 'from another site', cookie: both, origin: 'http://evil.example', nonce },
      { why: 'from a job origin', cookie: both, origin: `http://app-x-0.localhost:${w.port}`, nonce },
      { why: 'without an Origin', cookie: both, nonce },
      { why: 'without the nonce cookie', cookie: victim.cookie, origin: origin(w), nonce },
      { why: 'with another nonce', cookie: both, origin: origin(w), nonce: 'x'.repeat(43) },
      {
        why: 'with an empty nonce',
        cookie: `${victim.cookie}; ${NONCE_COOKIE}=`,
        origin: origin(w),
        nonce: '',
      },
    ];
    for (const a of attempts) {
      const posted = await request(w, 'POST', '/auth/link', {
        cookie: a.cookie,
        ...(a.origin !== undefined ? { origin: a.origin } : {}),
        form: { ticket: attackersPage.ticket, nonce: a.nonce },
      });
      assert.equal(posted.status, 403, `${a.why}: ${posted.status}`);
      assert.equal(setCookie(posted, 'ucompute_session'), undefined, a.why);
    }
    assert.equal(await whoIs(w, victim.cookie), 'bob');
    // Refused attempts do not use the link up: its holder may still confirm it.
    assert.ok(await w.store.signIns.link(hashToken(attackersPage.ticket)));
  });

  test('by tossed cookie: a request with two session cookies is refused and the cookie cleared', async () => {
    const victim = await signIn(w, 'bob');
    const attacker = await signIn(w, 'alice');
    for (const cookie of [
      `${attacker.cookie}; ${victim.cookie}`,
      `${victim.cookie}; ${attacker.cookie}`,
      `${victim.cookie}; ucompute_session=forged`,
    ]) {
      const answer = await request(w, 'GET', '/api/auth/session', { cookie });
      assert.equal(answer.status, 401, cookie);
      assert.match(answer.json().why as string, /2 session cookies/);
      assert.match(setCookie(answer, 'ucompute_session') ?? '', /^ucompute_session=$/);
      const submit = await request(w, 'POST', '/api/jobs', {
        cookie,
        csrf: victim.csrf,
        body: { items: [] },
      });
      assert.equal(submit.status, 401);
    }
    assert.equal(await whoIs(w, victim.cookie), 'bob');
  });
});

describe('served over https (a public URL of scheme https)', { timeout: 60_000 }, () => {
  const PUBLIC = 'https://compute.example.org';
  let w: World;
  before(async () => {
    w = await world({ publicUrl: PUBLIC });
  });
  after(() => w.close());

  test('the session cookie is __Host- prefixed and Secure; a plain-named one is no session', async () => {
    const answer = await request(w, 'POST', '/api/auth/session', { body: { token: w.tokens.bob } });
    assert.equal(answer.status, 200, answer.body);
    const line = answer.headers['set-cookie']?.[0] ?? '';
    assert.match(
      line,
      /^__Host-ucompute_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200; Secure$/,
    );
    const cookie = line.split(';')[0] ?? '';
    assert.equal(await whoIs(w, cookie), 'bob');
    // A sibling subdomain can set `ucompute_session` (with Domain=), never a __Host- cookie.
    const tossed = `ucompute_session=${cookie.split('=')[1]}`;
    assert.equal(await whoIs(w, tossed), undefined);
    assert.equal(await whoIs(w, `${tossed}; ${cookie}`), 'bob');
  });

  test('links and session URLs come from the public URL; the page confirms only from its origin', async () => {
    const link = await newLink(w, 'alice', `localhost:${w.port}`);
    assert.equal(link.origin, PUBLIC);
    const page = await request(w, 'GET', link.pathname + link.search);
    const nonce = /name="nonce" value="([^"]*)"/.exec(page.body)?.[1] ?? '';
    const nonceCookie = setCookie(page, `__Host-${NONCE_COOKIE}`);
    assert.ok(nonceCookie, String(page.headers['set-cookie']));
    assert.match(page.headers['set-cookie']?.join() ?? '', /; Secure/);
    const fromLocal = await request(w, 'POST', '/auth/link', {
      cookie: nonceCookie,
      origin: `http://localhost:${w.port}`,
      form: { ticket: link.searchParams.get('ticket') ?? '', nonce },
    });
    assert.equal(fromLocal.status, 403);
    const posted = await request(w, 'POST', '/auth/link', {
      cookie: nonceCookie,
      origin: PUBLIC,
      form: { ticket: link.searchParams.get('ticket') ?? '', nonce },
    });
    assert.equal(posted.status, 303, posted.body);
    assert.ok(setCookie(posted, '__Host-ucompute_session'));

    const id = await runningJob(w, FILE_SERVER);
    const opened = await request(w, 'POST', '/api/jobs/interactiveSession', {
      bearer: w.tokens.alice,
      host: 'evil.example',
      body: { items: [{ id, rank: 0, sessionType: 'WEB' }] },
    });
    assert.equal(opened.status, 200, opened.body);
    const session = (opened.json().responses as { session: { redirectClientTo: string } }[])[0]?.session;
    assert.match(session?.redirectClientTo ?? '', new RegExp(`^https://app-${id}-0\\.localhost/`));
  });
});
