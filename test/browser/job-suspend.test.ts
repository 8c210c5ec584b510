import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { serveClient } from '../support/browser.ts';
import { closeServedPage, QUOTA_BYTES, type ServedPage, serveWithPage } from '../support/dry-serve.ts';
import { needs } from '../support/local-tools.ts';
import { until } from '../support/until.ts';
import { openInApp } from '../support/web-app.ts';

/**
 * The web's job page in Chromium on `ucompute serve` with the dry backend (jobs run until stopped)
 * and a 1 MiB storage quota (dry-serve.ts, shared with files-trash in one process). Suspend and Resume, and the jobs list saying why a job waits: the job
 * is suspended from its page (after the dialog), the list shows who suspended it, Resume is refused
 * in the service's words while the owner is over its quota (a file written into the drive behind
 * the API's back, counted once the Trash is emptied), and accepted once there is room. And the
 * page's state when its first read of the job answers late. One browser, one page; its own time
 * budget.
 */

const tools = await needs('chromium-headless-shell', 'ip');

describe('the job page in the browser', { ...tools, timeout: 240_000 }, () => {
  let bigFile: string;
  let served: ServedPage | undefined;
  let page: Page;
  let url: string;
  let token: string;
  let pageErrors: string[] = [];

  before(async () => {
    served = await serveWithPage();
    ({ page, url, token, pageErrors } = served);
    bigFile = join(served.dataDir, 'storage', 'home', 'local', 'big.bin');
    // Signed in once, for every test of the file.
    await page.goto(url);
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Applications' }).waitFor();
  });

  after(async () => {
    await closeServedPage(served);
  });

  test('Suspend from the job page, the list says who; Resume refused over the quota, then accepted', async () => {
    const { api, submit } = serveClient(url, token);
    const state = async (id: string) =>
      (await api<{ status: { state: string } }>(`/api/jobs/retrieve?id=${id}`)).status.state;
    const id = await submit('terminal');
    await until(async () => (await state(id)) === 'RUNNING', {
      describe: 'the job runs',
      // A local job's start (namespace, sandbox) took over 10 s on a loaded machine.
      timeout: 60_000,
    });

    await openInApp(page, `/jobs/${id}`);
    await page.getByRole('button', { name: 'Suspend' }).click();
    await page.getByRole('dialog', { name: 'Suspend this job?' }).waitFor();
    await page.getByRole('button', { name: 'Yes, suspend the job' }).click();
    const suspended = /^Suspended by local: its processes are stopped; the job and its folder are kept/;
    await page.getByRole('status').filter({ hasText: suspended }).waitFor();
    assert.equal(await state(id), 'SUSPENDED');
    assert.equal(await page.getByRole('button', { name: 'Suspend' }).count(), 0, 'no Suspend once suspended');

    await openInApp(page, '/jobs');
    const row = page.locator(`tr[data-job="${id}"]`);
    await row.getByText(suspended).waitFor();
    assert.equal(await row.locator('.state').textContent(), 'Suspended');

    // Over the quota: Resume answers the service's 402, and the job stays suspended.
    writeFileSync(bigFile, Buffer.alloc(2 * QUOTA_BYTES));
    await api('/api/files/trash/empty', { drive: '/home/local' });
    await openInApp(page, `/jobs/${id}`);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page
      .getByRole('status')
      .filter({
        hasText: new RegExp(
          `^Not resumed: job ${id} cannot start: the storage quota of user local is used up: /home/local .*empty the Trash`,
        ),
      })
      .waitFor();
    assert.equal(await state(id), 'SUSPENDED');

    rmSync(bigFile);
    await api('/api/files/trash/empty', { drive: '/home/local' });
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('status').filter({ hasText: 'The job is back in the queue.' }).waitFor();
    await until(async () => (await state(id)) === 'RUNNING', {
      describe: 'the resumed job runs',
      timeout: 60_000,
    });
    await page.getByRole('button', { name: 'Suspend' }).waitFor();
    assert.deepEqual(pageErrors, []);
  });

  test('a job that started between the page\u2019s first read and its follow is shown running', async () => {
    const { api, submit } = serveClient(url, token);
    const id = await submit('terminal');
    await until(
      async () =>
        (await api<{ status: { state: string } }>(`/api/jobs/retrieve?id=${id}`)).status.state === 'RUNNING',
      { describe: 'the job runs', timeout: 60_000 },
    );
    // The page's first read answers last, with what a read taken before the start said (IN_QUEUE);
    // meanwhile the page's follow opened on the running job and sends no update. The page must
    // read the job again when the follow begins, and not take the older answer after the newer.
    const isRead = (u: URL) => u.pathname === '/api/jobs/retrieve';
    let reads = 0;
    let secondAnswered = () => {};
    const second = new Promise<void>((resolve) => {
      secondAnswered = resolve;
    });
    await page.route(isRead, async (route) => {
      const read = ++reads;
      const answer = await route.fetch();
      if (read > 1) {
        await route.fulfill({ response: answer });
        secondAnswered();
        return;
      }
      const job = (await answer.json()) as { status: { state: string } };
      job.status.state = 'IN_QUEUE';
      // Bounded: without a second read (the page does not read again) it answers after 10 s. The
      // timer unref'd: once the second read came, it does not hold the process 10 s at its end.
      await Promise.race([second, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
      await route.fulfill({ response: answer, json: job });
    });
    try {
      const firstFinished = page.waitForEvent('requestfinished', {
        predicate: (request) => isRead(new URL(request.url())),
        timeout: 60_000,
      });
      await page.goto(`${url}/jobs/${id}`);
      await firstFinished;
      // The page has the older answer once it has run what that answer set off.
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 200)));
      await page.locator('h1 .state-running').waitFor({ timeout: 30_000 });
      assert.equal(await page.locator('h1 .state-in_queue').count(), 0, 'the older state is not shown');
      assert.ok(reads >= 2, `the page read the job ${reads} time(s)`);
    } finally {
      await page.unroute(isRead);
      await api('/api/jobs/terminate', { items: [{ id }] });
    }
    assert.deepEqual(pageErrors, []);
  });
});
