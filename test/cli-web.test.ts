import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assertExit, CHILD_ENV, runCli } from './support/cli.ts';
import { type Served, startServe, stopServe } from './support/serve.ts';
import { until } from './support/until.ts';

/** `ucompute web`: the one-time sign-in link, printed, and handed to a browser without the secret. */

const {
  UCOMPUTE_URL: _url,
  UCOMPUTE_TOKEN: _token,
  UCOMPUTE_DATA_DIR: _dataDir,
  BROWSER: _b,
  ...env
} = CHILD_ENV;

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-web-cli-'));
let served: Served | undefined;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute web', () => {
  before(async () => {
    served = await startServe(mkdtempSync(join(tmp, 'data-')), { env });
  });

  after(async () => {
    await stopServe(served);
    rmSync(tmp, { recursive: true, force: true });
  });

  const on = () => ['--url', served!.url, '--data-dir', served!.dataDir];

  /**
   * Uses a sign-in link as a browser would: opens its page and, when there is one, confirms it with
   * the page's form. The status of the last answer and the session cookie it sets.
   */
  async function use(link: string): Promise<{ status: number; cookie: string }> {
    const page = await fetch(link, { redirect: 'manual' });
    const body = await page.text();
    if (page.status !== 200) return { status: page.status, cookie: '' };
    const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(body)?.[1] ?? '';
    const answer = await fetch(new URL('/auth/link', link), {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: page.headers.getSetCookie()[0]?.split(';')[0] ?? '',
        origin: new URL(link).origin,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ ticket: field('ticket'), nonce: field('nonce') }),
    });
    const cookie = answer.headers.getSetCookie().find((c) => c.startsWith('ucompute_session=')) ?? '';
    return { status: answer.status, cookie };
  }

  test('web --url-only prints only a link that signs in once', { timeout: 300_000 }, async () => {
    const result = await runCli(['web', '--url-only', ...on()], { env });
    assertExit(result, 0);
    const lines = result.stdout.trim().split('\n');
    assert.equal(lines.length, 1, result.stdout);
    const link = new URL(lines[0] ?? '');
    // The server's public URL: its loopback listen address, named localhost.
    assert.equal(link.origin, served!.url.replace('127.0.0.1', 'localhost'));
    assert.equal(link.pathname, '/auth/link');
    const first = await use(link.href);
    assert.equal(first.status, 303);
    assert.match(first.cookie, /^ucompute_session=/);
    assert.equal((await use(link.href)).status, 410);
  });

  test('web hands the browser a private page leading to the link, never the link', {
    timeout: 300_000,
  }, async () => {
    // A "browser" that records the arguments it was started with.
    const seen = join(tmp, 'browser-args');
    const browser = join(tmp, 'browser.sh');
    // Written aside, then renamed: the file appears whole, never empty between `>` and printf.
    writeFileSync(browser, `#!/bin/sh\nprintf '%s\\n' "$@" > '${seen}.part'\nmv '${seen}.part' '${seen}'\n`);
    chmodSync(browser, 0o755);
    const result = await runCli(['web', ...on()], { env: { ...env, BROWSER: browser } });
    assertExit(result, 0);
    const link = result.stdout.split('\n')[0] ?? '';
    assert.match(link, /\/auth\/link\?ticket=/);
    assert.match(result.stdout, /opened in your browser/);
    await until(() => statSync(seen, { throwIfNoEntry: false }), { describe: 'the browser is started' });
    const args = readFileSync(seen, 'utf8').trim();
    const ticket = new URL(link).searchParams.get('ticket') ?? '';
    assert.ok(!args.includes(ticket), 'the secret is not on the command line');
    const page = fileURLToPath(args);
    assert.equal(statSync(page).mode & 0o077, 0, 'only the user reads the page');
    assert.ok(readFileSync(page, 'utf8').includes(link), 'the page leads to the link');
    assert.equal((await use(link)).status, 303);
    // The page's folder stays for the browser, which may read it after the command ended: the
    // test removes it (one was left in the temporary folder by every suite).
    assert.match(basename(dirname(page)), /^ucompute-web-/);
    rmSync(dirname(page), { recursive: true, force: true });
  });

  test('web without a browser prints the link and says it works once', { timeout: 300_000 }, async () => {
    const { DISPLAY: _d, WAYLAND_DISPLAY: _w, ...headless } = env;
    const result = await runCli(['web', ...on()], { env: headless });
    assertExit(result, 0);
    assert.match(
      result.stdout,
      /^http:\/\/.*\/auth\/link\?ticket=\S+\n\(works once, within two minutes\)\n$/,
    );
  });
});
