import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AUTHORIZE_PATH } from '../../src/interactive/sessions.ts';
import { ONE_PLUS_ONE, serveClient, VNC_CONNECTED } from '../support/browser.ts';
import { type IsolatedChromium, launchChromium } from '../support/chromium.ts';
import { type PageGlobal, panelDrawn } from '../support/desktop-canvas.ts';
import { processesWithArgument } from '../support/interactive.ts';
import { localServe } from '../support/local-serve.ts';
import { needs } from '../support/local-tools.ts';
import { ROOT } from '../support/paths.ts';
import { until } from '../support/until.ts';
import {
  answerLost,
  capture,
  DESKTOP,
  failedRequestsOf,
  jobMeanwhile,
  openInApp,
  PHONE,
  shownOrExplained,
} from '../support/web-app.ts';

/**
 * Sessions researchers would choose over Open OnDemand and JupyterHub (issue 19), end to end: a
 * `ucompute serve` on the local backend (local-serve.ts: its own bridge and subnet, shared with
 * web-app in one process) driven in Debian's Chromium.
 * A session card's Connect opens the starting page, which goes on to Jupyter once it answers, where
 * a notebook of the user's home drive opens and a kernel computes 1+1 over its WebSocket through
 * the proxy (the link's ticket and the cookie's secret in no process's arguments); the desktop
 * (Xvnc and XFCE in the job) draws XFCE's panel and follows the size of the window; a project
 * member launches on the project's credits from its workspace; the job page's resource chart moves
 * under a job that burns CPU; an administrator revokes a token, which is refused from then on.
 * Pages are photographed at desktop and phone widths into test-artifacts/sessions (ours also
 * checked with axe-core). Each test has its own time budget.
 */

const tools = await needs(
  'bwrap',
  'nft',
  'ip',
  'chromium-headless-shell',
  'jupyter-notebook',
  'Xvnc',
  'dbus-launch',
  'xfce4-panel',
);
const ARTIFACTS = join(ROOT, 'test-artifacts', 'sessions');

/** A notebook in the user's home drive, with one cell of text to find. */
const NOTEBOOK = JSON.stringify({
  cells: [{ cell_type: 'markdown', metadata: {}, source: ['Hello from my home drive'] }],
  metadata: {},
  nbformat: 4,
  nbformat_minor: 5,
});

/** What the page functions below use of the page's document (the tests compile without the DOM's types). */
describe('sessions on the local backend, in a browser', tools, () => {
  let url: string;
  let admin: ReturnType<typeof serveClient>;
  let bobToken: string;
  let browser: Browser | undefined;
  let isolated: IsolatedChromium | undefined;
  let context: BrowserContext;
  let page: Page;
  let failedRequests: string[] = [];
  let serverLog = () => '';
  const jobs: string[] = [];

  const origin = () => url.replace('127.0.0.1', 'localhost');
  const jobState = async (id: string) =>
    (await admin.api<{ status: { state: string } }>(`/api/jobs/retrieve?id=${id}`)).status.state;

  before(
    async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      // Its jobs' use sampled every second (the resource chart's check waits on samples); its burn app.
      const served = await localServe();
      ({ url, serverLog } = served);
      admin = serveClient(url, served.token);
      // bob has no credits of his own; his project, lab, has.
      await admin.api('/api/admin/users', { name: 'bob' });
      await admin.api('/api/admin/projects', { id: 'lab', title: 'Lab' });
      await admin.api('/api/admin/projects/members', { projectId: 'lab', username: 'bob', role: 'USER' });
      await admin.api('/api/accounting/allocations', {
        owner: 'project:lab',
        category: 'u1-standard',
        credits: 100_000,
      });
      bobToken = (
        await admin.api<{ token: string }>('/api/admin/tokens', { username: 'bob', description: 'bob' })
      ).token;
      await admin.api('/api/files/folder', { path: '/home/local/notes' });
      const upload = await fetch(
        `${url}/api/files/upload?path=${encodeURIComponent('/home/local/notes/hello.ipynb')}`,
        {
          method: 'PUT',
          headers: {
            authorization: `Bearer ${served.token}`,
            'content-type': 'application/octet-stream',
          },
          body: NOTEBOOK,
        },
      );
      assert.equal(upload.status, 200, await upload.text());
      isolated = await launchChromium([Number(new URL(url).port)]);
      browser = isolated.browser;
      context = await browser.newContext({ viewport: DESKTOP });
      page = await context.newPage();
      failedRequests = failedRequestsOf(page);
      const { url: link } = await admin.api<{ url: string }>('/api/auth/links', {});
      await page.goto(link);
      await page.getByRole('button', { name: /^Sign in as / }).click();
      await page.getByRole('heading', { name: 'Applications' }).waitFor();
    },
    { timeout: 180_000 },
  );

  after(async () => {
    await isolated?.close();
    await stopJobs().catch(() => {});
  });

  /** Stops the jobs the tests started that still run. */
  async function stopJobs(): Promise<void> {
    const ids: string[] = [];
    for (const id of jobs.splice(0)) if (['IN_QUEUE', 'RUNNING'].includes(await jobState(id))) ids.push(id);
    if (ids.length > 0) await admin.api('/api/jobs/terminate', { items: ids.map((id) => ({ id })) });
    for (const id of ids)
      await until(async () => (await jobState(id)) !== 'RUNNING', {
        describe: `job ${id} stopped`,
        timeout: 60_000,
        every: 200,
      });
  }

  /** The admin's job of `app` from the API, running; jobs before it are stopped (the machine is small). */
  async function running(app: string): Promise<string> {
    await stopJobs();
    const id = await admin.submit(app);
    jobs.push(id);
    await admin.untilRunning(app, id);
    return id;
  }

  test("a session card's Connect opens the starting page, then Jupyter, where a notebook of the home drive opens", {
    timeout: 300_000,
  }, async () => {
    await stopJobs();
    await openInApp(page, '/apps/jupyter');
    await page.getByRole('group', { name: 'Folders' }).waitFor();
    await capture(page, ARTIFACTS, 'launch-jupyter');
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.waitForURL(/\/jobs\/[a-z0-9]+$/);
    const id = /\/jobs\/([a-z0-9]+)$/.exec(page.url())![1]!;
    jobs.push(id);
    await openInApp(page, '/jobs');
    const card = page.locator(`.session-cards li[data-job="${id}"]`);
    await shownOrExplained(
      card.locator('.state-running'),
      jobMeanwhile(admin.api, id, failedRequests, serverLog),
    );
    await capture(page, ARTIFACTS, 'session-card');
    // The one-time tickets the browser carries to the app's origin (to check no process shows them).
    const tickets: string[] = [];
    context.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === AUTHORIZE_PATH) tickets.push(u.searchParams.get('ticket') ?? '');
    });
    const [app] = await Promise.all([
      context.waitForEvent('page'),
      card.getByRole('link', { name: 'Connect' }).click(),
    ]);
    // The starting page, unless Jupyter answered at once: then it is already on its way.
    await app
      .getByRole('heading', { name: /Starting/ })
      .waitFor({ timeout: 10_000 })
      .then(
        () => app.screenshot({ path: join(ARTIFACTS, 'starting-desktop.png') }),
        () => undefined,
      );
    await app.waitForURL(new RegExp(`^http://app-${id}-0\\.localhost:\\d+/`), { timeout: 180_000 });
    await until(async () => /Jupyter|Home/.test(await app.title()), {
      describe: 'Jupyter drawn',
      timeout: 60_000,
      every: 200,
    });
    // The home drive is in the job at /work/<user>: Jupyter's tree shows it, and its notebook opens.
    const appOrigin = new URL(app.url()).origin;
    await app.goto(`${appOrigin}/tree/local/notes`);
    await app.getByText('hello.ipynb').first().waitFor({ timeout: 60_000 });
    await app.goto(`${appOrigin}/notebooks/local/notes/hello.ipynb`);
    await app.getByText('Hello from my home drive').first().waitFor({ state: 'attached', timeout: 60_000 });
    // The notebook's kernel, reached over its WebSocket through the proxy, computes.
    await app.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 60_000 });
    assert.equal(await app.evaluate<string>(ONE_PLUS_ONE), '2');
    // Neither the link's ticket nor the cookie's secret is in any process's arguments.
    const cookie = (await context.cookies(appOrigin)).find((c) => c.name === 'ucompute-session');
    assert.ok(cookie?.httpOnly);
    assert.equal(tickets.length, 1);
    for (const secret of [...tickets, cookie.value]) assert.deepEqual(processesWithArgument(secret), []);
    for (const [width, size] of [
      ['desktop', DESKTOP],
      ['phone', PHONE],
    ] as const) {
      await app.setViewportSize(size);
      await app.screenshot({ path: join(ARTIFACTS, `jupyter-home-notebook-${width}.png`) });
    }
    await app.close({ runBeforeUnload: false });
  });

  test('the desktop draws XFCE\u2019s panel and follows the size of the window', {
    timeout: 300_000,
  }, async () => {
    const id = await running('desktop');
    await openInApp(page, `/jobs/${id}`);
    await page.getByRole('link', { name: 'Open desktop' }).waitFor({ timeout: 60_000 });
    const [desktop] = await Promise.all([
      context.waitForEvent('page'),
      page.getByRole('link', { name: 'Open desktop' }).click(),
    ]);
    await desktop.locator(VNC_CONNECTED).waitFor({ timeout: 180_000 });
    await until(() => desktop.evaluate(panelDrawn), {
      describe: 'XFCE\u2019s panel drawn',
      timeout: 120_000,
      every: 200,
    });
    await desktop.screenshot({ path: join(ARTIFACTS, 'xfce-desktop-desktop.png') });
    // The desktop itself (its framebuffer, the canvas's width) follows the window: Xvnc resized it.
    const widthOf = () =>
      desktop.evaluate(
        () => (globalThis as unknown as PageGlobal).document.querySelector('#screen canvas')?.width ?? 0,
      );
    await desktop.setViewportSize(PHONE);
    await until(async () => Math.abs((await widthOf()) - PHONE.width) <= 2, {
      describe: 'the desktop resized to the phone\u2019s width',
      timeout: 60_000,
      every: 200,
    });
    await desktop.screenshot({ path: join(ARTIFACTS, 'xfce-desktop-phone.png') });
    // The clipboard panel opens on the page.
    await desktop.getByRole('button', { name: 'Clipboard' }).click();
    await desktop.getByLabel(/clipboard/).waitFor();
    await desktop.close();
  });

  test('a project member launches on the project\u2019s credits from its workspace', {
    timeout: 300_000,
  }, async () => {
    await stopJobs();
    const bob = await browser!.newContext({ viewport: DESKTOP });
    try {
      const own = await bob.newPage();
      const ownFailed = failedRequestsOf(own);
      await own.goto(origin());
      await own.getByLabel('API token').fill(bobToken);
      await own.getByRole('button', { name: 'Sign in' }).click();
      await own.getByRole('heading', { name: 'Applications' }).waitFor();
      // His own workspace has no credits: the refusal names it, and where credits are — also when
      // the browser lost the first answer.
      await openInApp(own, '/apps/terminal');
      const refused = await answerLost(own);
      await own.getByRole('button', { name: 'Submit' }).click();
      await own
        .getByText(/user bob has no allocation for u1-standard: run in a project that has credits/)
        .waitFor();
      await own.getByLabel('Workspace').selectOption('lab');
      await own.goto(`${origin()}/apps/terminal`);
      await own.getByText(/paid by project lab/).waitFor();
      assert.equal(await refused.status, 402);
      await capture(own, ARTIFACTS, 'launch-in-project');
      // The answer to the accepted submission is lost too: the page asks again and the job is made once.
      const accepted = await answerLost(own);
      await own.getByRole('button', { name: 'Submit' }).click();
      await own.waitForURL(/\/jobs\/[a-z0-9]+$/);
      const id = /\/jobs\/([a-z0-9]+)$/.exec(own.url())![1]!;
      jobs.push(id);
      assert.equal(await accepted.status, 200);
      const { items } = await admin.api<{ items: { id: string }[] }>(
        '/api/jobs/browse?filterCreatedBy=bob&itemsPerPage=250',
      );
      assert.deepEqual(
        items.map((j) => j.id),
        [id],
      );
      await own.getByText('bob in project lab').waitFor();
      await shownOrExplained(
        own.locator('h1 .state-running'),
        jobMeanwhile(admin.api, id, ownFailed, serverLog),
      );
      await capture(own, ARTIFACTS, 'job-in-project');
      const job = await admin.api<{ owner: { createdBy: string; project?: string } }>(
        `/api/jobs/retrieve?id=${id}`,
      );
      assert.deepEqual(job.owner, { createdBy: 'bob', project: 'lab' });
      // The choice is remembered: a new page opens in the project's workspace.
      const again = await bob.newPage();
      await again.goto(`${origin()}/jobs`);
      assert.equal(await again.getByLabel('Workspace').inputValue(), 'lab');
    } finally {
      await bob.close();
    }
  });

  test('the job page\u2019s resource chart moves under a job that burns CPU', {
    timeout: 300_000,
  }, async () => {
    const id = await running('burn');
    // Loaded: opened in place from the desktop's job page, it could show that job's samples first.
    await page.goto(`${origin()}/jobs/${id}`);
    const resources = page.getByTestId('resources');
    await resources.waitFor({ timeout: 60_000 });
    const samples = async () => Number(await resources.getAttribute('data-samples'));
    const first = await samples();
    await until(async () => (await samples()) > first, {
      describe: 'a new sample drawn',
      timeout: 60_000,
      every: 200,
    });
    // However loaded the machine, the loop uses some CPU, and the page says how much.
    await until(async () => Number.parseFloat((await page.getByTestId('cpu-0').textContent()) ?? '0') > 0, {
      describe: 'its CPU use shown',
      timeout: 60_000,
      every: 200,
    });
    await capture(page, ARTIFACTS, 'job-resources');
    // Stopped once seen: the tests after this one need no CPU burnt beside them.
    await stopJobs();
  });

  test('an administrator revokes a token in the web interface; it gets 401 from then on', {
    timeout: 120_000,
  }, async () => {
    const { token } = await admin.api<{ token: string }>('/api/admin/tokens', {
      username: 'bob',
      description: 'revoke me',
    });
    const wallets = () =>
      fetch(`${url}/api/accounting/wallets`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal((await wallets()).status, 200);
    await openInApp(page, '/admin');
    await page.getByRole('tab', { name: 'Tokens' }).click();
    await page.getByLabel('Search').fill('revoke me');
    // The row of that token: until the search's answer arrives, the list shows every token.
    const revoke = page
      .getByRole('row')
      .filter({ hasText: 'revoke me' })
      .getByRole('button', { name: /^Revoke token / });
    await revoke.waitFor({ timeout: 60_000 });
    await capture(page, ARTIFACTS, 'admin-tokens');
    await revoke.click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await until(async () => (await wallets()).status === 401, {
      describe: 'the token refused',
      timeout: 60_000,
      every: 200,
    });
    await page.getByRole('tab', { name: 'Audit log' }).click();
    await page.getByText('token.revoke').first().waitFor({ timeout: 60_000 });
    await capture(page, ARTIFACTS, 'admin-audit');
  });
});
