import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { serveClient } from '../support/browser.ts';
import { type IsolatedChromium, launchChromium } from '../support/chromium.ts';
import { localServe } from '../support/local-serve.ts';
import { needs } from '../support/local-tools.ts';
import { ROOT } from '../support/paths.ts';
import { until } from '../support/until.ts';
import {
  capture,
  DESKTOP,
  failedRequestsOf,
  jobMeanwhile,
  openInApp,
  shownOrExplained,
} from '../support/web-app.ts';

/**
 * The web interface end to end: `ucompute serve` on the local backend (local-serve.ts: its own
 * bridge and subnet, shared with sessions in one process) serving web/dist, driven in Debian's
 * Chromium as a researcher would: sign in with a token, find word-count in the catalogue, upload a
 * file, launch it from its form (an invalid value first, then the file picked from the drive),
 * watch it reach SUCCESS with its output on the job page, see the usage chart move; open a
 * terminal in a running job and run a command, extend it and cancel it; open the Jupyter example
 * (through its starting page) and see the job list follow its end. Each page is photographed at
 * desktop and phone widths into test-artifacts/web and checked with axe-core (no serious or
 * critical violations). One browser, one page for the whole file.
 */

const tools = await needs(
  'bwrap',
  'nft',
  'ip',
  'chromium-headless-shell',
  'jupyter-notebook',
  'Xvnc',
  'xterm',
);
const ARTIFACTS = join(ROOT, 'test-artifacts', 'web');

describe('the web interface in a browser', { ...tools, timeout: 300_000 }, () => {
  let url: string;
  let token: string;
  let browser: Browser | undefined;
  let isolated: IsolatedChromium | undefined;
  let page: Page;
  /** Errors the page's scripts threw or logged, other than refused calls the tests make on purpose. */
  const pageErrors: string[] = [];
  let failedRequests: string[] = [];
  let serverLog = () => '';

  const api = <T>(path: string, body?: unknown): Promise<T> => serveClient(url, token).api<T>(path, body);
  const jobStatus = async (id: string) =>
    (await api<{ status: { state: string; expiresAt: number } }>(`/api/jobs/retrieve?id=${id}`)).status;
  const jobState = async (id: string) => (await jobStatus(id)).state;
  const expiresAt = async (id: string) => (await jobStatus(id)).expiresAt;
  const meanwhile = (id: string) => jobMeanwhile(api, id, failedRequests, serverLog);
  const jobIdOfPage = () => /\/jobs\/([a-z0-9]+)$/.exec(new URL(page.url()).pathname)?.[1] ?? '';
  /** The focused element's label, and whether it is inside a dialog. */
  const focused = () =>
    page.evaluate(() => {
      type Focused = { getAttribute(name: string): string | null; closest(selector: string): unknown };
      const active = (globalThis as unknown as { document: { activeElement: Focused | null } }).document
        .activeElement;
      return {
        label: active?.getAttribute('aria-label') ?? null,
        inDialog: active?.closest('dialog') != null,
      };
    });
  /** The usage page's total, read as it opens (from another page when it shows already). */
  const usageTotal = async () => {
    if (new URL(page.url()).pathname === '/usage') await openInApp(page, '/');
    await openInApp(page, '/usage');
    const total = page.getByTestId('usage-total');
    await total.waitFor();
    await page.locator('.chart canvas').waitFor();
    return Number(((await total.textContent()) ?? '').replace(/[^0-9.]/g, ''));
  };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    // Beside the examples, an app whose description carries HTML that must not reach the page (hostile).
    const served = await localServe();
    ({ token, serverLog } = served);
    // The interface is used at localhost, as `ucompute serve` prints it for a browser.
    url = served.url.replace('127.0.0.1', 'localhost');
    isolated = await launchChromium([Number(new URL(url).port)]);
    browser = isolated.browser;
    page = await browser.newPage({ viewport: DESKTOP });
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    failedRequests = failedRequestsOf(page);
    page.on('console', (message) => {
      // Chromium logs every refused call; the sign-in check (401), the invalid form (400) and the
      // taken name in the rename dialog (409) are meant. Nothing else: in its own network namespace
      // Chromium never sees the pods' interfaces come and go (no ERR_NETWORK_CHANGED).
      const expected = /status of 40[019]/;
      if (message.type() === 'error' && !expected.test(message.text())) pageErrors.push(message.text());
    });
  });

  after(async () => {
    await isolated?.close();
    // Its jobs that still run (the files sharing the server stop theirs before it starts).
    const running = await api<{ items: { id: string }[] }>('/api/jobs/browse?filterState=RUNNING').catch(
      () => ({ items: [] }),
    );
    if (running.items.length > 0)
      await api('/api/jobs/terminate', { items: running.items.map((j) => ({ id: j.id })) }).catch(() => {});
  });

  test('signing in with a token leads to the catalogue; a wrong token is refused', async () => {
    await page.goto(url);
    await page.getByLabel('API token').waitFor();
    await page.getByLabel('API token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That token is not valid.').waitFor();
    await capture(page, ARTIFACTS, 'sign-in');
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Applications' }).waitFor();
    // The session is a cookie the page's scripts cannot read; nothing is kept in storage.
    const cookies = await page.context().cookies();
    assert.ok(cookies.find((c) => c.name === 'ucompute_session')?.httpOnly);
    assert.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0);
  });

  test('the catalogue shows the apps with their rendered descriptions, and search narrows them', async () => {
    await page.getByRole('link', { name: 'Word count' }).waitFor();
    await capture(page, ARTIFACTS, 'catalogue');
    await page.getByLabel('Search applications').fill('notebook');
    await page.getByRole('link', { name: 'Jupyter Notebook' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Word count' }).count(), 0);
    // Markdown is rendered: the description's `ucompute open ID` is code, not backticks.
    assert.equal(await page.locator('.app .description code').first().textContent(), 'ucompute open ID');
  });

  test("a description's HTML is sanitised: no script, no event handler, no javascript: link", async () => {
    await page.getByLabel('Search applications').fill('hostile');
    const description = page.locator('.app', { hasText: 'Hostile description' }).locator('.description');
    await description.locator('strong', { hasText: 'Bold' }).waitFor();
    assert.equal(await description.locator('script').count(), 0);
    assert.equal(await description.locator('[onerror]').count(), 0);
    assert.equal(await description.locator('a[href^="javascript:"]').count(), 0);
    // The HTML is shown as the text it is.
    await description.getByText('<script>window.scripted = true</script>').waitFor();
  });

  let usageBefore = 0;
  test('the usage page shows the allocations and the chart', async () => {
    usageBefore = await usageTotal();
    await page.getByRole('table', { name: 'Allocations' }).waitFor();
    await capture(page, ARTIFACTS, 'usage');
  });

  test('a file dropped into the drive by the upload control appears in the folder', async () => {
    await openInApp(page, '/files');
    await page.locator('.path', { hasText: '/home/local' }).waitFor();
    await page.getByLabel('Files to upload').setInputFiles(join(ROOT, 'examples', 'data', 'moby.txt'));
    await page.getByRole('link', { name: 'moby.txt' }).waitFor();
    await page.locator('.uploads', { hasText: 'done' }).waitFor();
    await capture(page, ARTIFACTS, 'files');
  });

  test("new folder, rename, move and delete ask in the interface's dialogs, with the server's refusal at the field", async () => {
    await openInApp(page, '/files');
    await page.locator('.path', { hasText: '/home/local' }).waitFor();
    await page.getByRole('button', { name: 'New folder' }).click();
    const create = page.getByRole('dialog', { name: 'New folder' });
    await page.getByLabel('Name of the new folder in /home/local').fill('results');
    await create.getByRole('button', { name: 'Create folder' }).click();
    await page.getByRole('button', { name: '📁 results' }).waitFor();
    assert.equal(await create.count(), 0);

    // A name that is taken: the server's message at the field, the dialog still open.
    const renameButton = page.getByRole('button', { name: 'Rename results' });
    await renameButton.click();
    const rename = page.getByRole('dialog', { name: 'Rename results' });
    await rename.getByLabel('New name').fill('moby.txt');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await rename.locator('.field.invalid .error', { hasText: 'exists' }).waitFor();
    assert.equal(await rename.getByLabel('New name').getAttribute('aria-invalid'), 'true');
    await capture(page, ARTIFACTS, 'files-rename-refused');
    // Escape closes it, and focus goes back to the button that opened it.
    await page.keyboard.press('Escape');
    await rename.waitFor({ state: 'detached' });
    assert.deepEqual(await focused(), { label: 'Rename results', inDialog: false });
    // Focus stays in the dialog: Tab from its last button comes back inside it.
    await renameButton.click();
    // The dialog opens on the next render: Tab only once its field has focus.
    await rename.getByLabel('New name').waitFor();
    await page.waitForFunction(
      () =>
        (globalThis as unknown as { document: { activeElement: { tagName: string } | null } }).document
          .activeElement?.tagName === 'INPUT',
    );
    for (let i = 0; i < 4; i++) await page.keyboard.press('Tab');
    assert.equal((await focused()).inDialog, true);
    await rename.getByLabel('New name').fill('outputs');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('button', { name: '📁 outputs' }).waitFor();

    await page.getByRole('button', { name: 'Move outputs' }).click();
    await page.getByLabel('New path (a full path, with the name)').fill('/home/local/moved');
    await page.getByRole('button', { name: 'Move', exact: true }).click();
    await page.getByRole('button', { name: '📁 moved' }).waitFor();

    await page.getByRole('button', { name: 'Delete moved' }).click();
    await page.getByRole('dialog', { name: 'Delete moved?' }).waitFor();
    await capture(page, ARTIFACTS, 'files-delete');
    await page.getByRole('button', { name: 'Move to the trash' }).click();
    await page.getByRole('button', { name: '📁 moved' }).waitFor({ state: 'detached' });
  });

  test('word-count from its form: an invalid value is shown at its field, then the job runs to SUCCESS', async () => {
    await openInApp(page, '/apps/word-count');
    const top = page.getByLabel('How many words to show');
    await top.fill('0');
    await page.getByRole('button', { name: 'Browse…' }).click();
    await page.getByRole('button', { name: 'Use moby.txt' }).click();
    assert.equal(await page.getByLabel('Text file').inputValue(), '/home/local/moby.txt');
    await page.getByRole('button', { name: 'Submit' }).click();
    // The server's message, at the field it names.
    const error = page
      .locator('.field.invalid', { has: page.getByLabel('How many words to show') })
      .locator('.error');
    await error.waitFor();
    assert.match((await error.textContent()) ?? '', /1/);
    await capture(page, ARTIFACTS, 'launch-invalid');
    await top.fill('3');
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.waitForURL(/\/jobs\/[a-z0-9]+$/);
    await shownOrExplained(page.locator('h1 .outcome-completed'), meanwhile(jobIdOfPage()));
    // The three most frequent words, counted in the job, on the page.
    await until(
      async () => ((await page.locator('pre.log').textContent()) ?? '').trim().split('\n').length === 3,
      { describe: 'the log lines', timeout: 60_000, every: 200 },
    );
    assert.match((await page.locator('pre.log').textContent()) ?? '', /^\s*\d+ \w+/);
    await capture(page, ARTIFACTS, 'job-success');
    await openInApp(page, '/jobs');
    await page.locator('tbody tr').first().locator('.outcome-completed').waitFor();
    await capture(page, ARTIFACTS, 'jobs');
  });

  test('the usage chart moves once the job is charged', async () => {
    await until(async () => (await usageTotal()) > usageBefore, {
      describe: 'a higher total',
      timeout: 60_000,
      every: 200,
    });
  });

  test('a running terminal job: a command runs in its terminal, it is extended, then cancelled', async () => {
    await openInApp(page, '/apps/terminal');
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.waitForURL(/\/jobs\/[a-z0-9]+$/);
    const id = jobIdOfPage();
    // The state on the page is pushed: no reload.
    await shownOrExplained(page.locator('h1 .state-running'), meanwhile(id));
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('.xterm-rows').waitFor();
    await until(async () => ((await page.locator('.xterm-rows').textContent()) ?? '').trim() !== '', {
      describe: 'a prompt',
      timeout: 60_000,
      every: 200,
    });
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('echo $((6*7))');
    await page.keyboard.press('Enter');
    await until(
      async () =>
        (await page.locator('.xterm-rows > div').allTextContents()).some((row) => row.trim() === '42'),
      { describe: 'the answer', timeout: 60_000, every: 200 },
    );
    await capture(page, ARTIFACTS, 'job-terminal');

    const before = await expiresAt(id);
    await page.getByLabel('Extend by').selectOption('1');
    await page.getByRole('button', { name: 'Extend', exact: true }).click();
    await page.getByText(/Extended: the job now ends at/).waitFor();
    const extended = await expiresAt(id);
    assert.equal(extended - before, 3600_000);

    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByRole('dialog', { name: 'Cancel this job?' }).waitFor();
    await capture(page, ARTIFACTS, 'job-cancel');
    await page.getByRole('button', { name: 'Yes, cancel the job' }).click();
    await until(async () => ['SUCCESS', 'FAILURE'].includes(await jobState(id)), {
      describe: 'the job ended',
      timeout: 60_000,
      every: 200,
    });
    // The badge says what happened: cancelled, not a green success.
    await shownOrExplained(page.locator('h1 .outcome-cancelled'), meanwhile(id));
    assert.equal(await page.locator('h1 .outcome-cancelled').textContent(), 'Cancelled');
    assert.equal(await page.getByTestId('outcome').textContent(), 'cancelled by local');
  });

  test('the Jupyter example opens from the job page: a starting page, then the app itself', async () => {
    await openInApp(page, '/apps/jupyter');
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.waitForURL(/\/jobs\/[a-z0-9]+$/);
    const id = jobIdOfPage();
    await shownOrExplained(page.locator('h1 .state-running'), meanwhile(id));
    const [app] = await Promise.all([
      page.context().waitForEvent('page'),
      page.getByRole('link', { name: 'Open interface' }).click(),
    ]);
    // The starting page waits for Jupyter to answer, then goes there by itself.
    await app.waitForURL(new RegExp(`^http://app-${id}-0\\.localhost:\\d+/`), { timeout: 120_000 });
    await until(async () => /Jupyter|Home/.test(await app.title()), {
      describe: 'Jupyter drawn',
      timeout: 60_000,
      every: 200,
    });
    await app.screenshot({ path: join(ARTIFACTS, 'jupyter.png') });
    await app.close();

    // The list follows it live: its end reaches the row with no reload.
    await openInApp(page, '/jobs');
    const row = page.locator(`tr[data-job="${id}"]`);
    await shownOrExplained(row.locator('.state-running'), meanwhile(id));
    await page.evaluate(() => {
      (globalThis as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    await api('/api/jobs/terminate', { items: [{ id }] });
    await shownOrExplained(row.locator('.outcome-cancelled'), meanwhile(id));

    // A job submitted elsewhere (the API, as the CLI and other tabs do) joins the open list.
    const created = await api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [
        {
          application: { name: 'terminal', version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    });
    const otherId = created.responses[0]?.id ?? '';
    const other = page.locator(`tr[data-job="${otherId}"]`);
    await shownOrExplained(other, meanwhile(otherId));
    assert.equal(await page.locator('tbody tr').first().getAttribute('data-job'), otherId);
    await shownOrExplained(other.locator('.state-running'), meanwhile(otherId));
    await api('/api/jobs/terminate', { items: [{ id: otherId }] });
    await shownOrExplained(other.locator('.outcome-cancelled'), meanwhile(otherId));
    assert.equal(
      await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded),
      true,
    );
  });

  test('administration offers users, projects, members and grants', async () => {
    await openInApp(page, '/admin');
    await page.getByRole('heading', { name: 'Create a project' }).waitFor();
    await capture(page, ARTIFACTS, 'admin');
  });

  test('signing out (from the menu under the user name) leads back to the sign-in page, also after a reload', async () => {
    await page.locator('.user-menu summary').click();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await page.reload();
    await page.getByLabel('API token').waitFor();
  });

  test('a one-time sign-in link (what `ucompute web` prints) opens the interface signed in', async () => {
    // In the page just signed out (its session refused from then on, as in a browser never signed in).
    const { url: link } = await api<{ url: string }>('/api/auth/links', {});
    await page.goto(link);
    // The link's page asks first: opening a link alone signs nobody in.
    await page.getByRole('heading', { name: /^Sign in to ucompute as / }).waitFor();
    await page.getByRole('button', { name: /^Sign in as / }).click();
    await page.getByRole('heading', { name: 'Applications' }).waitFor();
    assert.doesNotMatch(page.url(), /ticket/);
  });

  test('no page threw or logged an error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
