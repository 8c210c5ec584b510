/**
 * Time to a usable session (issue 10) on the local backend, as root with bubblewrap: `ucompute
 * serve --backend local` on its own bridge and subnet with the host's userland (as the browser
 * test runs it), then `--runs` times, one job after the other:
 *
 * 1. `POST /api/jobs` of the Jupyter example (examples/apps/jupyter.yml);
 * 2. RUNNING, as `GET /api/jobs/retrieve` reports it (polled);
 * 3. the first page: the session link opened (`POST /api/jobs/interactiveSession`), its ticket
 *    traded for the cookie on the job's origin, and Jupyter's page answering 200 through the
 *    proxy (redirects followed; until Jupyter listens the proxy answers 502 and we ask again);
 * 4. a kernel answering: one created over Jupyter's REST API, `1+1` sent over its WebSocket
 *    channels through the proxy, and its `execute_result` of 2 received.
 *
 * Times are from the POST; polling every 20 ms. Each job is stopped before the next starts (the
 * machine has room for one). No browser: HTTP and WebSocket from this process, with the Host header
 * of the job's origin.
 *
 *   node bench/session.bench.ts [--runs 10]
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { which } from '../src/backends/local/exec.ts';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import { type Answer, call } from '../test/support/interactive.ts';
import { serving, spawnServe } from '../test/support/serve.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' } } });
const RUNS = Number(values.runs);
const POLL_MS = 20;
const WAIT_MS = 120_000;

for (const tool of ['bwrap', 'nft', 'ip', 'jupyter-notebook']) {
  if (!(await which(tool))) throw new Error(`${tool} is needed (scripts/setup.sh installs it)`);
}
if (process.getuid?.() !== 0) throw new Error('the local backend runs as root');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, attempt: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + WAIT_MS;
  while (Date.now() < end) {
    const got = await attempt().catch(() => undefined);
    if (got !== undefined) return got;
    await sleep(POLL_MS);
  }
  throw new Error(`${what} did not happen within ${WAIT_MS / 1000} s`);
}

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

  interface Run {
    running: number;
    page: number;
    kernel: number;
  }

  async function once(): Promise<Run> {
    const start = performance.now();
    const created = await api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [
        {
          application: { name: 'jupyter', version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    });
    const id = created.responses[0]?.id ?? '';
    try {
      await until('RUNNING', async () => ((await stateOf(id)) === 'RUNNING' ? true : undefined));
      const running = performance.now() - start;
      const opened = await api<{ responses: { session: { redirectClientTo: string } }[] }>(
        '/api/jobs/interactiveSession',
        { items: [{ id, rank: 0, sessionType: 'WEB' }] },
      );
      const link = new URL(opened.responses[0]?.session.redirectClientTo ?? '');
      const landed = await call(port, { host: link.host, path: link.pathname + link.search });
      const ours = (landed.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
      if (landed.status !== 303 || ours === '') throw new Error(`the link answered ${landed.status}`);
      const first = await until('the first page', async () => {
        const answer = await page(link.host, ours, landed.headers.location ?? '/');
        return answer.status === 200 ? answer : undefined;
      });
      const pageAt = performance.now() - start;
      const xsrf = /_xsrf=([^;]+)/.exec((first.headers['set-cookie'] ?? []).join('\n'))?.[1] ?? '';
      const two = await onePlusOne(link.host, `${ours}; _xsrf=${xsrf}`, xsrf);
      if (two !== '2') throw new Error(`1+1 gave ${two}`);
      return { running, page: pageAt, kernel: performance.now() - start };
    } finally {
      await api('/api/jobs/terminate', { items: [{ id }] });
      await until('the job ending', async () => ((await stateOf(id)) === 'RUNNING' ? undefined : true));
    }
  }

  const quantile = (xs: number[], q: number): number => {
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
  };
  const seconds = (ms: number) => (ms / 1000).toFixed(2);

  console.log(
    `load average at the start: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
  );
  console.log('| run | RUNNING s | first page s | kernel 1+1 s |');
  console.log('| --- | --- | --- | --- |');
  const runs: Run[] = [];
  for (let i = 1; i <= RUNS; i++) {
    const r = await once();
    runs.push(r);
    console.log(`| ${i} | ${seconds(r.running)} | ${seconds(r.page)} | ${seconds(r.kernel)} |`);
  }
  console.log('\n| from POST /api/jobs to | p50 s | p90 s |');
  console.log('| --- | --- | --- |');
  for (const [what, key] of [
    ['RUNNING', 'running'],
    ['first page through the proxy', 'page'],
    ['kernel answering 1+1', 'kernel'],
  ] as const) {
    const xs = runs.map((r) => r[key]);
    console.log(`| ${what} | ${seconds(quantile(xs, 0.5))} | ${seconds(quantile(xs, 0.9))} |`);
  }
  console.log(
    `\nload average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
} finally {
  server?.kill('SIGTERM');
  await new Promise((resolve) => (server?.exitCode === null ? server.once('exit', resolve) : resolve(null)));
  await removeBridgeNetwork(bridge).catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
}
