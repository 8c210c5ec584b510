/**
 * The web interface: the size of what a browser loads first (the JavaScript and CSS that
 * web/dist/index.html names, gzipped), and the time from navigation to the job list drawn in
 * Chromium with 1,000 jobs in the store (the server in this process over the dry backend; p50 of
 * a few loads, each a fresh navigation with the browser's cache left warm, as a returning user has it).
 *
 *   node bench/web.bench.ts [--runs 7]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { call, world } from '../test/support/interactive.ts';
import { ROOT } from '../test/support/paths.ts';
import { builtWebApp, WEB_DIST } from '../test/support/web-app.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const RUNS = Number(values.runs);
const JOBS = 1000;
/** The rows of the list's first page (web/src/pages/jobs.tsx). */
const FIRST_PAGE = 50;

/** The files index.html loads before anything is shown: its scripts, preloads and styles. */
function initialBundle(): { files: string[]; gzipped: number; raw: number } {
  const html = readFileSync(join(WEB_DIST, 'index.html'), 'utf8');
  const files = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
  let gzipped = 0;
  let raw = 0;
  for (const file of files) {
    const body = readFileSync(join(WEB_DIST, file));
    raw += body.length;
    gzipped += gzipSync(body, { level: 9 }).length;
  }
  return { files, gzipped, raw };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

builtWebApp();
const bundle = initialBundle();
const w = await world();
try {
  const host = `localhost:${w.port}`;
  // A thousand jobs of alice's, in bulk requests of the API's largest size.
  const created = await call(w.port, {
    host,
    path: '/api/jobs',
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      items: Array.from({ length: JOBS }, (_, i) => ({
        application: { name: 'terminal', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        name: `bench ${i}`,
        parameters: {},
      })),
    }),
  });
  if (created.status !== 200) throw new Error(`creating the jobs: ${created.status} ${created.body}`);

  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const url = `http://${host}`;
  await page.goto(url);
  await page.getByLabel('API token').fill(w.tokens.alice);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Applications' }).waitFor();

  const times: number[] = [];
  const browseTimes: number[] = [];
  for (let run = 0; run < RUNS + 1; run++) {
    await page.goto(`${url}/jobs`);
    await page
      .locator('table.jobs tbody tr')
      .nth(FIRST_PAGE - 1)
      .waitFor();
    // Milliseconds since this navigation started, read as the list is there, and the page of jobs' own call.
    const [ms, browse] = await page.evaluate(() => [
      performance.now(),
      performance.getEntriesByType('resource').find((e) => e.name.includes('/api/jobs/browse'))?.duration ??
        0,
    ]);
    if (run > 0) {
      times.push(ms!);
      browseTimes.push(browse!);
    }
  }
  await browser.close();
  times.sort((a, b) => a - b);
  browseTimes.sort((a, b) => a - b);
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim();
  console.log(
    `commit ${commit}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}, ${RUNS} runs`,
  );
  console.log(
    `initial bundle: ${(bundle.gzipped / 1024).toFixed(1)} KiB gzipped (${(bundle.raw / 1024).toFixed(1)} KiB raw) in ${bundle.files.length} files: ${bundle.files.join(', ')}`,
  );
  console.log(
    `job list with ${JOBS} jobs, navigation to first ${FIRST_PAGE} rows drawn: p50 ${percentile(times, 0.5).toFixed(0)} ms, min ${times[0]!.toFixed(0)} ms, max ${times.at(-1)!.toFixed(0)} ms (of which the browse call p50 ${percentile(browseTimes, 0.5).toFixed(0)} ms)`,
  );
} finally {
  await w.close();
}
