/**
 * `ucompute serve` on the dry backend for the browser files that drive the web interface's pages
 * without running anything (files-trash, job-suspend), once per test process (per-process.ts): jobs
 * run until stopped, and the storage quota is 1 MiB (job-suspend goes over it). Each file has a
 * page of its own on it, and must not depend on what another did there: each leaves the drive as it
 * found it.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { stopChild } from './browser.ts';
import { type IsolatedChromium, launchChromium } from './chromium.ts';
import { perProcess } from './per-process.ts';
import { serving, spawnServe } from './serve.ts';
import { builtWebApp, DESKTOP } from './web-app.ts';

/** The storage quota of every user of the dry serve. */
export const QUOTA_BYTES = 1024 * 1024;

const dryServe = perProcess(async () => {
  builtWebApp();
  const tmp = mkdtempSync(join(tmpdir(), 'ucompute-dry-serve-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const config = join(tmp, 'config.yml');
  writeFileSync(config, `dry: { runForMs: null }\nstorage: { quota: { defaultBytes: ${QUOTA_BYTES} } }\n`);
  const server = spawnServe(['--data-dir', dataDir, '--config', config]);
  const stop = async () => {
    await stopChild(server);
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    // The interface is used at localhost (its cookies need a name, not an IP).
    const url = (await serving(server)).replace('127.0.0.1', 'localhost');
    return { url, dataDir, token: readFileSync(join(dataDir, 'admin.token'), 'utf8').trim(), stop };
  } catch (error) {
    await stop();
    throw error;
  }
});

/** The process's dry serve and a Chromium page of the file's own at desktop size. */
export interface ServedPage {
  /** Chromium in its own network namespace (the file's part closed with closeServedPage). */
  isolated: IsolatedChromium;
  browser: Browser;
  page: Page;
  /** The server's address with `localhost`. */
  url: string;
  /** The server's data folder (its drives under storage/). */
  dataDir: string;
  /** The administrator's (`local`'s) token the server wrote into its data folder. */
  token: string;
  /** The page's uncaught errors, collected from its start. */
  pageErrors: string[];
}

export async function serveWithPage(): Promise<ServedPage> {
  const { url, dataDir, token } = await dryServe();
  const isolated = await launchChromium([Number(new URL(url).port)]);
  const browser = isolated.browser;
  const page = await browser.newPage({ viewport: DESKTOP });
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  return { isolated, browser, page, url, dataDir, token, pageErrors };
}

/** Closes the file's pages (the server stays for the process's other files). */
export async function closeServedPage(served: ServedPage | undefined): Promise<void> {
  await served?.isolated.close();
}
