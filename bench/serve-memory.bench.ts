/**
 * `ucompute serve --backend kubernetes` (a child process, Node's flags as ./ucompute runs it)
 * holding N live jobs, on the fake API server of the tests (test/support/fake-kube/, in this
 * process): N one-replica jobs are submitted through ucompute's API, 16 at a time; the Volcano
 * stand-in admits and runs each at once and never ends it (credits are not required: see the
 * config below). Reported: serve's RSS and V8 heap before any job and once all N are RUNNING
 * (or --live-after seconds have passed), as they are and after a full GC (asked through serve's
 * inspector, opened by SIGUSR1): what live jobs retain, apart from garbage V8 has not collected
 * yet — and serve's peak RSS (VmHWM) up to each point. With --snapshots DIR, serve writes a heap
 * snapshot into DIR (SIGUSR2) at both points. serve runs with the Node flags ./ucompute gives it,
 * on Node's command line as there (V8 refuses some flags in NODE_OPTIONS); --node-flags adds more
 * after them (a later flag wins), for A/B runs of V8's flags.
 *
 * Then the N jobs stay live for --hold seconds (60 by default): serve's RSS at the end of that
 * (`held`, with the least and most RSS sampled each second meanwhile) is the steady state, after the
 * submissions' and transitions' garbage — what a deployment with N live jobs holds — and serve's CPU
 * seconds over the hold are what N live jobs cost when nothing happens to them.
 *
 * With --allocations FILE, what serve allocates during the hold (V8's sampling heap profiler, the
 * objects collected since counted too) is written to FILE (.heapprofile: Chrome's DevTools read it).
 *
 *   node bench/serve-memory.bench.ts [--jobs 10000] [--live-after S] [--hold S] [--node-flags F]
 *       [--snapshots DIR] [--allocations FILE]
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BIN, CHILD_ENV } from '../test/support/cli.ts';
import { fakeCluster } from '../test/support/fake-kube/cluster.ts';
import { ROOT } from '../test/support/paths.ts';
import { type Served, serving, stopServe, ucomputeEnv, ucomputeNodeFlags } from '../test/support/serve.ts';
import { until } from '../test/support/until.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    snapshots: { type: 'string' },
    'live-after': { type: 'string' },
    'node-flags': { type: 'string', default: '' },
    hold: { type: 'string', default: '60' },
    allocations: { type: 'string' },
  },
});
const JOBS = Number(values.jobs);
const SPEC = {
  application: { name: 'sim-batch', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: { runTime: { type: 'text', value: '1d' } },
};

const cleanups: (() => unknown)[] = [];
const cluster = await fakeCluster({ after: (cleanup) => void cleanups.push(cleanup) });
cluster.api.onChange((type, plural, object) => {
  const jobId = object.metadata.labels?.['ucompute.dev/job-id'];
  // The stand-in gives a new job its PodGroup a moment after its create; then it is admitted and runs.
  if (plural !== 'podgroups' || type !== 'ADDED' || !jobId) return;
  setImmediate(() => {
    cluster.volcano.admit(jobId);
    cluster.volcano.run(jobId);
  });
});
const work = await mkdtemp(join(os.tmpdir(), 'ucompute-serve-memory-'));
const data = join(work, 'data');
await mkdir(join(data, 'storage'), { recursive: true });
const snapshots = values.snapshots;
if (snapshots) await mkdir(snapshots, { recursive: true });
const nodeFlags = [
  ...ucomputeNodeFlags(),
  ...values['node-flags'].split(' ').filter(Boolean),
  '--inspect-port=127.0.0.1:0',
  ...(snapshots ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshots}`] : []),
];
const configFile = join(work, 'config.yml');
await writeFile(
  configFile,
  [
    `apps: [${join(ROOT, 'examples/apps')}, ${join(ROOT, 'test/cluster/apps')}]`,
    `storage: { root: ${join(data, 'storage')} }`,
    'security: { allowRootApps: true }',
    // Credits are checked by a query over the owner's live jobs on each charge: with one owner
    // holding 10,000 that made RUNNING take seconds per job (not the memory measured here).
    'accounting: { requireCredits: false }',
    'kubernetes:',
    `  kubeconfig: ${cluster.kubeconfig}`,
    '  namespaceStrategy: single',
    '  namespace: ucompute-jobs',
    '  requestsPerSecond: 5000',
    '  requestBurst: 5000',
  ].join('\n'),
);
const child = spawn(
  process.execPath,
  [
    ...nodeFlags,
    BIN,
    'serve',
    '--port',
    '0',
    '--data-dir',
    data,
    '--backend',
    'kubernetes',
    '--config',
    configFile,
  ],
  {
    cwd: ROOT,
    env: { ...CHILD_ENV, ...ucomputeEnv(), UCOMPUTE_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  },
);
const served: Served = { child, url: await serving(child), dataDir: data };
const pid = served.child.pid!;
const token = (await readFile(join(data, 'admin.token'), 'utf8')).trim();
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
const inspector = new Promise<string>((resolve) => {
  let text = '';
  served.child.stderr!.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    const url = /Debugger listening on (ws:\S+)/.exec(text)?.[1];
    if (url) resolve(url);
  });
});
/** A session on serve's inspector (opened by SIGUSR1): `send` a method, `close` it. */
async function inspectorSession() {
  process.kill(pid, 'SIGUSR1');
  const ws = new WebSocket(await inspector);
  await new Promise((resolve) => ws.addEventListener('open', resolve, { once: true }));
  let id = 0;
  const send = <T = { result?: { value?: string } }>(method: string, params = {}) =>
    new Promise<T>((resolve) => {
      const asked = ++id;
      const answer = (m: MessageEvent) => {
        const d = JSON.parse(String(m.data)) as { id?: number; result: T };
        if (d.id !== asked) return;
        ws.removeEventListener('message', answer);
        resolve(d.result);
      };
      ws.addEventListener('message', answer);
      ws.send(JSON.stringify({ id: asked, method, params }));
    });
  return { send, close: () => ws.close() };
}
/** serve's process.memoryUsage() in MB, after a full GC (through its inspector). */
async function afterFullGc(): Promise<Record<string, number>> {
  const { send, close } = await inspectorSession();
  await send('HeapProfiler.collectGarbage');
  const usage = await send('Runtime.evaluate', {
    expression: 'JSON.stringify(process.memoryUsage())',
  });
  close();
  const bytes = JSON.parse(usage.result!.value!) as Record<string, number>;
  return Object.fromEntries(Object.entries(bytes).map(([k, v]) => [k, Math.round(v / 2 ** 20)]));
}
/** serve's resident set now (VmRSS) and at its peak so far (VmHWM), in MB. */
const rss = async () => {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]) / 1024);
  return { rss: mb('VmRSS'), peakRss: mb('VmHWM') };
};
/**
 * serve's CPU time so far (user + system; /proc counts it in ticks of 1/100 s): what a V8 flag
 * costs besides memory.
 */
const cpuSeconds = async () => {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const heapMb = async () => {
  const text = await (await fetch(`${served.url}/metrics`)).text();
  const mb = (name: string) =>
    Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) / 2 ** 20);
  return { heapUsed: mb('nodejs_heap_size_used_bytes'), heapTotal: mb('nodejs_heap_size_total_bytes') };
};
/** A heap snapshot of serve's (it forces a full GC first), once its file is complete. */
async function snapshot(): Promise<void> {
  if (!snapshots) return;
  const before = new Set(await readdir(snapshots));
  process.kill(pid, 'SIGUSR2');
  let size = -1;
  await until(
    async () => {
      const fresh = (await readdir(snapshots)).filter((f) => !before.has(f));
      if (fresh.length === 0) return false;
      const now = (await readFile(join(snapshots, fresh[0]!))).length;
      const done = now > 0 && now === size;
      size = now;
      return done;
    },
    { describe: 'the heap snapshot written', timeout: 600_000, every: 2000 },
  );
}
/** How many jobs serve's store has RUNNING (its /metrics). */
const running = async () => {
  const text = await (await fetch(`${served.url}/metrics`)).text();
  return Number(/^ucompute_jobs\{state="RUNNING"\} (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
};

const start = performance.now();
await until(async () => (await running()) === 0, { describe: 'serve answering', timeout: 30_000 });
await snapshot();
const idle = { ...(await rss()), ...(await heapMb()) };
const idleAfterGc = await afterFullGc();
let next = 0;
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (next < JOBS) {
      next++;
      const answer = await fetch(`${served.url}/api/jobs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ items: [SPEC] }),
      });
      if (!answer.ok) throw new Error(`submit: ${answer.status} ${await answer.text()}`);
    }
  }),
);
const submitted = performance.now();
const liveAfter = values['live-after'] ? Number(values['live-after']) * 1000 : undefined;
if (liveAfter === undefined)
  await until(async () => (await running()) >= JOBS, {
    describe: `all ${JOBS} jobs RUNNING`,
    timeout: 3_600_000,
    every: 2000,
  });
else await new Promise((resolve) => setTimeout(resolve, liveAfter));
const runningSeen = await running();
await snapshot();
const live = { ...(await rss()), ...(await heapMb()), running: runningSeen, cpuSeconds: await cpuSeconds() };
const holdMs = Number(values.hold) * 1000;
const rssDuringHold: number[] = [];
const sampling = values.allocations ? await inspectorSession() : undefined;
await sampling?.send('HeapProfiler.startSampling', {
  samplingInterval: 16_384,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
for (const end = performance.now() + holdMs; performance.now() < end; ) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  rssDuringHold.push((await rss()).rss);
}
if (sampling) {
  const { profile } = await sampling.send<{ profile: unknown }>('HeapProfiler.stopSampling');
  await writeFile(values.allocations!, JSON.stringify(profile));
  sampling.close();
}
const held = {
  seconds: holdMs / 1000,
  ...(await rss()),
  ...(await heapMb()),
  minRss: Math.min(...rssDuringHold),
  maxRss: Math.max(...rssDuringHold),
  running: await running(),
  cpuSeconds: Math.round(((await cpuSeconds()) - live.cpuSeconds) * 100) / 100,
};
const liveAfterGc = await afterFullGc();
console.log(
  JSON.stringify({
    jobs: JOBS,
    nodeFlags: nodeFlags.join(' '),
    submitSeconds: Math.round((submitted - start) / 100) / 10,
    idle,
    idleAfterGc,
    live,
    held,
    liveAfterGc,
    rssPerJobKb: Math.round(((live.rss - idle.rss) * 1024) / JOBS),
    heapUsedPerJobKb: Math.round(((live.heapUsed - idle.heapUsed) * 1024) / JOBS),
    heapUsedAfterGcPerJobKb: Math.round(((liveAfterGc.heapUsed! - idleAfterGc.heapUsed!) * 1024) / JOBS),
    load: os.loadavg().map((l) => l.toFixed(1)),
  }),
);
await stopServe(served);
for (const cleanup of cleanups.reverse()) await cleanup();
await rm(work, { recursive: true, force: true });
