import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { serveClient } from '../support/browser.ts';
import { closeServedPage, type ServedPage, serveWithPage } from '../support/dry-serve.ts';
import { needs } from '../support/local-tools.ts';
import { until } from '../support/until.ts';
import { openInApp } from '../support/web-app.ts';

/**
 * The Files page's "Empty trash" in Chromium, on `ucompute serve` with the dry backend (dry-serve.ts,
 * shared with job-suspend in one process; nothing runs here: only files): a file put in the Trash through the API is listed there; the button, once
 * confirmed, deletes it for good, on disk as in the listing, and the drive's usage line follows.
 * One browser, one page; its own time budget.
 */

const tools = await needs('chromium-headless-shell', 'ip');

describe('emptying the trash in the browser', { ...tools, timeout: 120_000 }, () => {
  let dataDir: string;
  let served: ServedPage | undefined;
  let page: Page;
  let url: string;
  let token: string;
  let pageErrors: string[] = [];

  before(async () => {
    served = await serveWithPage();
    ({ page, url, dataDir, token, pageErrors } = served);
  });

  after(async () => {
    await closeServedPage(served);
  });

  test('Empty trash, confirmed, deletes what is in the Trash for good', async () => {
    const trashOnDisk = join(dataDir, 'storage', 'home', 'local', 'Trash');
    const upload = await fetch(`${url}/api/files/upload?path=/home/local/old-results.csv`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
      body: 'x'.repeat(300_000),
    });
    assert.equal(upload.status, 200, await upload.text());
    await serveClient(url, token).api('/api/files/trash', { path: '/home/local/old-results.csv' });
    assert.deepEqual(readdirSync(trashOnDisk), ['old-results.csv']);

    await page.goto(url);
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Applications' }).waitFor();
    await openInApp(page, `/files?path=${encodeURIComponent('/home/local/Trash')}`);
    const files = page.getByRole('table', { name: 'Files' });
    await files.getByText('old-results.csv').waitFor();
    // The dry serve's quota (QUOTA_BYTES).
    const usage = page.getByText(/ of 1\.0 MiB used/);
    await usage.waitFor();
    const usedBefore = await usage.textContent();

    await page.getByRole('button', { name: 'Empty trash' }).click();
    await page.getByRole('dialog', { name: 'Empty the trash of /home/local?' }).waitFor();
    await page.getByRole('button', { name: 'Delete for good' }).click();
    await until(async () => (await files.getByText('old-results.csv').count()) === 0, {
      describe: 'the listing no longer shows the file',
    });
    assert.deepEqual(readdirSync(trashOnDisk), [], 'the Trash is empty on disk');
    assert.equal(existsSync(join(dataDir, 'storage', 'home', 'local', 'old-results.csv')), false);
    await until(async () => (await usage.textContent()) !== usedBefore, {
      describe: 'the usage line shows the freed space',
    });
    assert.deepEqual(pageErrors, []);
  });
});
