/**
 * Time to a usable session (issues 10 and 19) on the local backend, as root with bubblewrap:
 * `ucompute serve --backend local` on its own bridge and subnet with the host's userland (as the
 * browser test runs it), then `--runs` times, one job after the other:
 *
 * 1. `POST /api/jobs` of the Jupyter example (examples/apps/jupyter.yml);
 * 2. RUNNING, as `GET /api/jobs/retrieve` reports it (polled);
 * 3. the first page: the session link opened (`POST /api/jobs/interactiveSession`), its ticket
 *    traded for the cookie on the job's origin, and Jupyter's page answering 200 through the
 *    proxy (redirects followed; until Jupyter listens the proxy answers 502 and we ask again);
 * 4. a kernel answering: one created over Jupyter's REST API, `1+1` sent over its WebSocket
 *    channels through the proxy, and its `execute_result` of 2 received.
 *
 * The peer, in the same run: the same Jupyter started directly by this process (no ucompute, no
 * sandbox) until it answers HTTP on its socket (asked every 100 ms), the floor ucompute adds to.
 *
 * Then `--desktop-runs` times the XFCE desktop (examples/apps/desktop.yml) in Debian's Chromium:
 * POST → RUNNING → noVNC on the session's page connected through the relay (the page says so) →
 * XFCE's panel drawn on its canvas (the browser test's check). One browser for all runs.
 *
 * Times are from the POST; polling every 20 ms. Each job is stopped before the next starts (the
 * machine has room for one). Jupyter without a browser: HTTP and WebSocket from this process, with
 * the Host header of the job's origin.
 *
 *   node bench/session.bench.ts [--runs 10] [--desktop-runs 10]
 */
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Browser, chromium } from 'playwright-core';
import WebSocket from 'ws';
import { which } from '../src/backends/local/exec.ts';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import { startJupyter, VNC_CONNECTED } from '../test/support/browser.ts';
import { panelDrawn } from '../test/support/desktop-canvas.ts';
import { type Answer, call } from '../test/support/interactive.ts';
import { serving, spawnServe } from '../test/support/serve.ts';
import { until } from '../test/support/until.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '10' }, 'desktop-runs': { type: 'string', default: '10' } },
});
const RUNS = Number(values.runs);
const DESKTOP_RUNS = Number(values['desktop-runs']);
const POLL_MS = 20;
const WAIT_MS = 120_000;

const CHROMIUM = '/usr/bin/chromium';
for (const tool of [
  'bwrap',
  'nft',
  'ip',
  'jupyter-notebook',
  CHROMIUM,
  'Xvnc',
  'dbus-launch',
  'xfce4-panel',
]) {
  if (!(await which(tool))) throw new Error(`${tool} is needed (scripts/setup.sh installs it)`);
}
if (process.getuid?.() !== 0) throw new Error('the local backend runs as root');

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-session-bench-'));
// Passable by others: the sandbox reaches the data folder as containers' unprivileged host users.
chmodSync(tmp, 0o711);
const bridge = `usb${process.pid % 100_000}`;
const subnet = `10.${200 + (process.pid % 50)}.${Math.floor(Math.random() * 256)}.0/24`;
writeFileSync(
  join(tmp, 'config.yml'),
  `local:\n  hostUserland: true\n  network: { bridge: ${bridge}, subnet: ${subnet} }\n`,
);
let server: ChildProcess | undefined;
let browser: Browser | undefined;

try {
  server = spawnServe([
    '--data-dir',
    join(tmp, 'data'),
    '--config',
    join(tmp, 'config.yml'),
    '--backend',
    'local',
  ]);
  const url = await serving(server);
  // The server's log, kept after the run (a desktop that never came is explained there).
  const serveLog = join(tmpdir(), `ucompute-session-bench-${process.pid}.log`);
  for (const stream of [server.stdout, server.stderr])
    stream?.on('data', (c: string | Buffer) => appendFileSync(serveLog, c));
  console.log(`the server's log: ${serveLog}`);
  const port = Number(new URL(url).port);
  const token = readFileSync(join(tmp, 'data', 'admin.token'), 'utf8').trim();

  const api = async <T>(path: string, body?: unknown): Promise<T> => {
    const answer = await fetch(`${url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = await answer.json();
    if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${JSON.stringify(json)}`);
    return json as T;
  };
  const stateOf = async (id: string): Promise<string> => {
    const job = await api<{ status: { state: string }; updates: unknown[] }>(`/api/jobs/retrieve?id=${id}`);
    if (job.status.state === 'FAILURE') throw new Error(`job ${id} failed: ${JSON.stringify(job.updates)}`);
    return job.status.state;
  };

  /** Jupyter's page at `path` through the proxy, redirects followed on the same origin. */
  async function page(host: string, cookie: string, path: string): Promise<Answer> {
    let answer = await call(port, { host, path, headers: { cookie } });
    for (let hops = 0; hops < 5 && answer.status >= 300 && answer.status < 400; hops++) {
      const next = new URL(answer.headers.location ?? '/', `http://${host}${path}`);
      answer = await call(port, { host, path: next.pathname + next.search, headers: { cookie } });
    }
    return answer;
  }

  /** Creates a kernel and answers what `1+1` gives over its channels. */
  async function onePlusOne(host: string, cookie: string, xsrf: string): Promise<string> {
    const created = await call(port, {
      host,
      path: '/api/kernels',
      method: 'POST',
      headers: { cookie, 'x-xsrftoken': xsrf, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'python3' }),
    });
    if (created.status !== 201) throw new Error(`starting a kernel: ${created.status} ${created.body}`);
    const kernel = JSON.parse(created.body) as { id: string };
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/kernels/${kernel.id}/channels`, {
      headers: { host, cookie },
    });
    try {
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      socket.send(
        JSON.stringify({
          header: {
            msg_id: 'one-plus-one',
            username: '',
            session: 'bench',
            msg_type: 'execute_request',
            version: '5.3',
            date: new Date().toISOString(),
          },
          parent_header: {},
          metadata: {},
          channel: 'shell',
          buffers: [],
          content: {
            code: '1+1',
            silent: false,
            store_history: false,
            user_expressions: {},
            allow_stdin: false,
          },
        }),
      );
      return await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no answer to 1+1')), WAIT_MS);
        socket.on('message', (data) => {
          const message = JSON.parse(String(data));
          if (message.msg_type !== 'execute_result') return;
          clearTimeout(timer);
          resolve(message.content.data['text/plain']);
        });
      });
    } finally {
      socket.close();
    }
  }

  /** Submits the example app `name`; gives the job's id. */
  async function submit(name: string): Promise<string> {
    const created = await api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [
        {
          application: { name, version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    });
    return created.responses[0]?.id ?? '';
  }
  async function stop(id: string): Promise<void> {
    await api('/api/jobs/terminate', { items: [{ id }] });
    await until(async () => (await stateOf(id)) !== 'RUNNING', {
      describe: 'the job ending',
      timeout: WAIT_MS,
      every: POLL_MS,
    });
  }

  interface Run {
    running: number;
    page: number;
    kernel: number;
    /** The peer: the same Jupyter started directly, to its first HTTP answer. */
    direct: number;
  }

  async function jupyterOnce(): Promise<Omit<Run, 'direct'>> {
    const start = performance.now();
    const id = await submit('jupyter');
    try {
      await until(async () => (await stateOf(id)) === 'RUNNING', {
        describe: 'RUNNING',
        timeout: WAIT_MS,
        every: POLL_MS,
      });
      const running = performance.now() - start;
      const opened = await api<{ responses: { session: { redirectClientTo: string } }[] }>(
        '/api/jobs/interactiveSession',
        { items: [{ id, rank: 0, sessionType: 'WEB' }] },
      );
      const link = new URL(opened.responses[0]?.session.redirectClientTo ?? '');
      const landed = await call(port, { host: link.host, path: link.pathname + link.search });
      const ours = (landed.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
      if (landed.status !== 303 || ours === '') throw new Error(`the link answered ${landed.status}`);
      const first = await until(
        async () => {
          const answer = await page(link.host, ours, landed.headers.location ?? '/');
          return answer.status === 200 ? answer : undefined;
        },
        { describe: 'the first page', timeout: WAIT_MS, every: POLL_MS },
      );
      const pageAt = performance.now() - start;
      const xsrf = /_xsrf=([^;]+)/.exec((first.headers['set-cookie'] ?? []).join('\n'))?.[1] ?? '';
      const two = await onePlusOne(link.host, `${ours}; _xsrf=${xsrf}`, xsrf);
      if (two !== '2') throw new Error(`1+1 gave ${two}`);
      const kernel = performance.now() - start;
      return { running, page: pageAt, kernel };
    } finally {
      await stop(id);
    }
  }

  /** Jupyter started by this process, no ucompute between: ms to its first HTTP answer. */
  async function directJupyterOnce(): Promise<number> {
    const work = mkdtempSync(join(tmp, 'direct-'));
    const start = performance.now();
    const jupyter = await startJupyter(work, join(work, 'jupyter.log'));
    const answered = performance.now() - start;
    await jupyter.stop();
    rmSync(work, { recursive: true, force: true });
    return answered;
  }

  interface DesktopRun {
    running: number;
    connected: number;
    drawn: number;
  }

  async function desktopOnce(shown: Browser): Promise<DesktopRun> {
    const start = performance.now();
    const id = await submit('desktop');
    const page = await shown.newPage({ viewport: { width: 1280, height: 800 } });
    // What the page met, told when the desktop does not come.
    const met: string[] = [];
    page.on('console', (m) => met.push(`console ${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => met.push(`error: ${e.message}`));
    page.on('requestfailed', (r) => met.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('websocket', (w) => {
      met.push(`websocket ${w.url()}`);
      w.on('close', () => met.push('websocket closed'));
    });
    try {
      await until(async () => (await stateOf(id)) === 'RUNNING', {
        describe: 'RUNNING',
        timeout: WAIT_MS,
        every: POLL_MS,
      });
      const running = performance.now() - start;
      const opened = await api<{ responses: { session: { url: string } }[] }>(
        '/api/jobs/interactiveSession',
        {
          items: [{ id, rank: 0, sessionType: 'VNC' }],
        },
      );
      await page.goto(opened.responses[0]?.session.url ?? '');
      await page.locator(VNC_CONNECTED).waitFor({ timeout: WAIT_MS });
      const connected = performance.now() - start;
      await until(() => page.evaluate(panelDrawn), {
        describe: 'XFCE\u2019s panel drawn',
        timeout: WAIT_MS,
        every: POLL_MS,
      });
      return { running, connected, drawn: performance.now() - start };
    } catch (error) {
      const status = await page
        .locator('#status')
        .textContent()
        .catch(() => null);
      throw new Error(
        `desktop ${id}: ${(error as Error).message}; job ${await stateOf(id)}, page: ${status}\n${met.join('\n')}`,
      );
    } finally {
      await page.close();
      await stop(id);
    }
  }

  const quantile = (xs: number[], q: number): number => {
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
  };
  const seconds = (ms: number) => (ms / 1000).toFixed(2);
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  const summary = <K extends string>(rows: Record<K, number>[], what: [string, K][]) => {
    console.log('\n| from POST /api/jobs to | p50 s | p90 s |');
    console.log('| --- | --- | --- |');
    for (const [label, key] of what) {
      const xs = rows.map((r) => r[key]);
      console.log(`| ${label} | ${seconds(quantile(xs, 0.5))} | ${seconds(quantile(xs, 0.9))} |`);
    }
  };

  console.log(`load average at the start: ${load()}\n`);
  if (RUNS > 0) {
    console.log('| run | RUNNING s | first page s | kernel 1+1 s | peer: Jupyter direct s |');
    console.log('| --- | --- | --- | --- | --- |');
    const runs: Run[] = [];
    for (let i = 1; i <= RUNS; i++) {
      const r = { ...(await jupyterOnce()), direct: await directJupyterOnce() };
      runs.push(r);
      console.log(
        `| ${i} | ${seconds(r.running)} | ${seconds(r.page)} | ${seconds(r.kernel)} | ${seconds(r.direct)} |`,
      );
    }
    summary(runs, [
      ['RUNNING', 'running'],
      ['first page through the proxy', 'page'],
      ['kernel answering 1+1', 'kernel'],
      ['(peer, from its start) Jupyter started directly: first HTTP answer', 'direct'],
    ]);
    const pageP50 = quantile(
      runs.map((r) => r.page),
      0.5,
    );
    const directP50 = quantile(
      runs.map((r) => r.direct),
      0.5,
    );
    const ratio = pageP50 / directP50;
    console.log(`\nfirst page through ucompute / Jupyter started directly, p50: ${ratio.toFixed(2)}`);
    console.log(`load average after Jupyter: ${load()}\n`);
  }

  if (DESKTOP_RUNS > 0) {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    console.log('| run | RUNNING s | noVNC connected s | XFCE panel drawn s |');
    console.log('| --- | --- | --- | --- |');
    const desktops: DesktopRun[] = [];
    for (let i = 1; i <= DESKTOP_RUNS; i++) {
      const r = await desktopOnce(browser);
      desktops.push(r);
      console.log(`| ${i} | ${seconds(r.running)} | ${seconds(r.connected)} | ${seconds(r.drawn)} |`);
    }
    summary(desktops, [
      ['RUNNING', 'running'],
      ['noVNC connected through the relay', 'connected'],
      ['XFCE panel drawn', 'drawn'],
    ]);
  }
  console.log(`\nload average at the end: ${load()}`);
} finally {
  await browser?.close();
  server?.kill('SIGTERM');
  await new Promise((resolve) => (server?.exitCode === null ? server.once('exit', resolve) : resolve(null)));
  await removeBridgeNetwork(bridge).catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
}
