/** The web interface in tests and benchmarks: its build, and checks of its pages in Chromium. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import type { Locator, Page } from 'playwright-core';
import { ROOT } from './paths.ts';

export const WEB_DIST = join(ROOT, 'web', 'dist');

/** web/dist as the set-up script leaves it; built here when missing (a checkout without the set-up run). */
export function builtWebApp(): void {
  if (existsSync(join(WEB_DIST, 'index.html'))) return;
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'web', '--logLevel', 'warn'],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
}

const AXE = readFileSync(join(ROOT, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * axe-core's serious and critical violations on the page as it is now (none expected): every rule,
 * or only `rules`.
 */
export async function seriousViolations(page: Page, rules?: readonly string[]): Promise<string[]> {
  // Evaluated, not added as a script: the interface's Content-Security-Policy refuses inline scripts.
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(AXE);
  const violations = await page.evaluate(
    async (only) =>
      (
        (await (
          globalThis as unknown as { axe: { run(options: object): Promise<{ violations: unknown[] }> } }
        ).axe.run(only === undefined ? {} : { runOnly: { type: 'rule', values: only } })) as {
          violations: Violation[];
        }
      ).violations,
    rules,
  );
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/**
 * The axe-core rules whose outcome follows the layout rather than the document: text against what
 * is drawn behind it, and regions that scroll. The interface's phone width (style.css's one
 * max-width query) changes no element and no colour: it hides the `.wide` table columns (header
 * and cells alike), narrows paddings and grids, and shrinks h1 (still large text), so every other
 * rule sees at phone width a part of what it saw at desktop width.
 */
const LAYOUT_RULES = ['color-contrast', 'scrollable-region-focusable'] as const;

/**
 * Screenshots of the page at desktop and phone widths into `folder`; the accessibility check with
 * every rule at desktop width, and with the layout's rules (LAYOUT_RULES) at phone width.
 */
export async function capture(page: Page, folder: string, name: string): Promise<void> {
  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: join(folder, `${name}-desktop.png`), fullPage: true });
  assert.deepEqual(await seriousViolations(page), [], `${name} at desktop width`);
  await page.setViewportSize(PHONE);
  await page.screenshot({ path: join(folder, `${name}-phone.png`), fullPage: true });
  assert.deepEqual(await seriousViolations(page, LAYOUT_RULES), [], `${name} at phone width`);
  await page.setViewportSize(DESKTOP);
}

/**
 * Opens `path` in the interface already loaded in `page` as its links and the Back button do (the
 * History API, no page load: the document, its scripts and axe-core stay), and lets it render.
 * Opening the path it shows already changes nothing. A page opened so from another of its kind
 * (a job's from another job's) may show the other's data until its effects ran: load such a page.
 */
export async function openInApp(page: Page, path: string): Promise<void> {
  await page.evaluate(async (to) => {
    const w = globalThis as unknown as {
      history: { pushState(state: null, unused: string, url: string): void };
      dispatchEvent(event: unknown): void;
      PopStateEvent: new (type: string) => unknown;
    };
    w.history.pushState(null, '', to);
    w.dispatchEvent(new w.PopStateEvent('popstate'));
    await new Promise((resolve) => setTimeout(resolve, 0));
  }, path);
}

/**
 * Waits until `locator` shows in the page; when it has not within `timeout`, fails with what
 * `explain` tells then (the job as the server has it: its state, status and updates; what the page
 * met), so that a failure says whether the job or the page fell behind.
 */
export async function shownOrExplained(
  locator: Locator,
  explain: () => Promise<unknown>,
  timeout = 120_000,
): Promise<void> {
  try {
    await locator.waitFor({ timeout });
  } catch (error) {
    const said = await explain().catch((e: unknown) => `not known: ${String(e)}`);
    assert.fail(`${(error as Error).message}\nmeanwhile: ${inspect(said, { depth: 6, breakLength: 120 })}`);
  }
}

/**
 * The page's requests that failed (the newest 20, each with when and why), collected from now on:
 * part of what a failed wait is told with (Chromium drops loads when host interfaces change).
 */
export function failedRequestsOf(page: Page): string[] {
  const failed: string[] = [];
  page.on('requestfailed', (request) => {
    failed.push(`${new Date().toISOString()} ${request.url()}: ${request.failure()?.errorText}`);
    failed.splice(0, failed.length - 20);
  });
  return failed;
}

/**
 * The page's next job submission reaches the server, but the browser loses the answer, as Chromium
 * drops requests in flight when the machine's network changes (ERR_NETWORK_CHANGED: the local
 * backend adds and removes pods' interfaces). Resolves with the status the server answered.
 */
export async function answerLost(p: Page): Promise<{ status: Promise<number> }> {
  let told!: (status: number) => void;
  let failed!: (e: unknown) => void;
  const status = new Promise<number>((resolve, reject) => {
    told = resolve;
    failed = reject;
  });
  await p.route(
    (u) => u.pathname === '/api/jobs',
    async (route) => {
      if (route.request().method() !== 'POST') return route.fallback();
      try {
        const answer = await route.fetch();
        await route.abort('internetdisconnected');
        told(answer.status());
      } catch (e) {
        failed(e);
      }
    },
    { times: 1 },
  );
  return { status };
}

/**
 * What a wait on a job's row, card or badge is told with when the page does not show it: the job as
 * the server has it (state, outcome, start, updates), the requests the page saw fail, and the
 * server's newest warnings and errors.
 */
export function jobMeanwhile(
  api: <T>(path: string) => Promise<T>,
  id: string,
  failedRequests: readonly string[],
  serverLog: () => string,
): () => Promise<unknown> {
  return async () => {
    const job = await api<{ status: Record<string, unknown>; updates: unknown[] }>(
      `/api/jobs/retrieve?id=${id}`,
    ).catch((e: unknown) => `not known: ${String(e)}`);
    return {
      serverSide:
        typeof job === 'string'
          ? job
          : {
              state: job.status.state,
              outcome: job.status.outcome,
              startedAt: job.status.startedAt,
              updates: job.updates,
            },
      failedRequests,
      serverLog: serverLog(),
    };
  };
}
