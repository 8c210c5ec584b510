/**
 * The local backend on the real runtime (issue 4): bubblewrap, cgroups and a network namespace per
 * pod, as root. Three measurements:
 *
 * 1. submit-to-RUNNING latency of a one-replica Volcano Job running `true`, one job after the other
 *    (each waits for the previous one to end); RUNNING is the backend's RUNNING event. Also
 *    submit-to-SUCCESS, and a breakdown of where the time goes (runtime calls timed by a wrapper).
 * 2. `--jobs` trivial jobs (`true`) end to end: all submitted, then waited for. Each requests 10m CPU
 *    and 16Mi memory from the machine's detected capacity (2 cores: 200 pods at once); the rest
 *    queue in the backend's scheduler. The submissions are awaited one after the other, as one
 *    client would make them; `--concurrent-submit` makes them all at once.
 * 3. The same with `podman run --rm` of `true` in a tiny local image (built with `podman import`
 *    from /bin/true and its libraries; no pull): start latency, sequential, and throughput with
 *    `--podman-concurrency` runs at once. When `--podman-jobs` is below `--jobs`, podman's time for
 *    `--jobs` is extrapolated from its rate, and the table says so. Skipped, saying why, when podman
 *    cannot run here.
 *
 * Issue 18's targets, which the table's target column and its last line judge: submit → RUNNING
 * p50 ≤ 10 ms and ≥ 14× podman's start (`podman run -d`); the 1,000 jobs ≤ 10 s and ≥ 20× podman's
 * time for as many.
 *
 * The backend is built as `openLocalBackend` builds it (createRuntime, then localBackend), with a
 * timing wrapper around the runtime. It uses its own bridge (ucbench0) and the subnet the runtime
 * derives, free on the host (a fixed 10.93.0.0/16 was refused beside a test's instance that had
 * derived 10.93.48.0/20), so that it does not touch the pods of a ucompute or a test run on the
 * same machine; the bridge, its nftables tables, the temporary folder, podman's containers and
 * image are all removed at the end.
 *
 * Its data folder is made in `--dir` (default /var/lib: where `ucompute serve` keeps its data as
 * root, and podman its containers). Not in /tmp: on this kind of machine / is ext4 without a
 * journal, whose inode allocation skips, one by one, every inode freed in the last minutes in the
 * same block group, and /tmp's groups hold every test's temporary files: there, each of the ~6
 * files and folders a job creates cost ~0.5 ms of CPU (0.02 ms in a group of its own), ~1.5-2 ms a
 * job of ucompute's main thread and the supervisors, varying with others' work. A run also frees
 * its own inodes at its end: the next run in the same folder pays for them for a few minutes.
 *
 *   node bench/local.bench.ts [--jobs 1000] [--latency 200] [--podman 30] [--podman-jobs 100]
 *                             [--podman-concurrency 4] [--concurrent-submit] [--dir /var/lib]
 */
import { execFile, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRuntime } from '../src/backends/local/create-runtime.ts';
import { which } from '../src/backends/local/exec.ts';
import { imageResolver } from '../src/backends/local/images/resolve.ts';
import { type LocalBackend, localBackend } from '../src/backends/local/local-backend.ts';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import type { Pod, Runtime } from '../src/backends/local/runtime.ts';
import type { VolcanoJob } from '../src/volcano/api/types.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '1000' },
    latency: { type: 'string', default: '200' },
    podman: { type: 'string', default: '30' },
    'podman-jobs': { type: 'string', default: '100' },
    'podman-concurrency': { type: 'string', default: '4' },
    'concurrent-submit': { type: 'boolean', default: false },
    timeline: { type: 'string' },
    dir: { type: 'string', default: '/var/lib' },
  },
});
const JOBS = Number(values.jobs);
const LATENCY_JOBS = Number(values.latency);
const PODMAN_RUNS = Number(values.podman);
const PODMAN_JOBS = Number(values['podman-jobs']);
const PODMAN_CONCURRENCY = Number(values['podman-concurrency']);
/** Submits the batch all at once instead of one call after the other (each awaited). */
const CONCURRENT_SUBMIT = values['concurrent-submit'];
/** A file for the batch's timeline: per 100 ms, pods created/started/ended, the event loop's use, runnable tasks. */
const TIMELINE = values.timeline;
/** Issue 18's targets: RUNNING p50, the batch's wall time, and how many times faster than podman. */
const TARGET = { p50: 10, wallSeconds: 10, startVsPodman: 14, batchVsPodman: 20 };
/** Bounds on every wait, so that a stuck job ends the run instead of hanging it. */
const JOB_TIMEOUT_MS = 30_000;
const BATCH_TIMEOUT_MS = 600_000;
const BRIDGE = 'ucbench0';
const PREFIX = `ucb${process.pid}`;

const missing = [];
for (const c of ['bwrap', 'nft', 'ip']) if ((await which(c)) === null) missing.push(c);
if (process.getuid?.() !== 0) missing.push('root');
if (missing.length > 0) {
  console.error(`local.bench: the real runtime needs ${missing.join(', ')}; nothing measured`);
  process.exit(1);
}

// ---- statistics -------------------------------------------------------------------------------

/** Nearest-rank percentile. */
function pct(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '—');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '—');
const int = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '—');

function table(head: string[], rows: string[][], right: boolean[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (right[i] ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}

/** utime, stime, cutime, cstime of a process, in seconds. */
function processTimes(pid: number | 'self'): number[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tick = 100; // USER_HZ
  return [11, 12, 13, 14].map((i) => Number(fields[i]) / tick);
}

/**
 * CPU seconds of this process, and of its descendants: those that ended, plus the live launcher
 * with the processes it started and waited for (supervisors, ip, bwrap, true, …); and
 * of the launcher's own process alone (the live Node child).
 */
function cpuSeconds(): { self: number; children: number; launcher: number } {
  const [user, system, childUser, childSystem] = processTimes('self');
  let children = childUser! + childSystem!;
  let launcher = 0;
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== process.pid) continue;
      const [u, s, cu, cs] = processTimes(Number(entry));
      children += u! + s! + cu! + cs!;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('launcher-main')) launcher += u! + s!;
    } catch {
      // Ended meanwhile: its time is in our children's now.
    }
  }
  return { self: user! + system!, children, launcher };
}

// ---- the backend, with the runtime's calls timed ----------------------------------------------

interface Marks {
  submit?: number;
  createPod0?: number;
  createPod1?: number;
  start0?: number;
  start1?: number;
  running?: number;
  exited?: number;
  destroy0?: number;
  destroy1?: number;
  ended?: number;
  state?: string;
}

const marks = new Map<string, Marks>();
/** Running totals for the timeline. */
const counts = { created: 0, exited: 0, destroyed: 0 };
const markOf = (jobId: string) => {
  let m = marks.get(jobId);
  if (!m) {
    m = {};
    marks.set(jobId, m);
  }
  return m;
};
const now = () => performance.now();

function timedPod(pod: Pod, m: Marks): Pod {
  return {
    name: pod.name,
    jobId: pod.jobId,
    ip: pod.ip,
    hostsFile: pod.hostsFile,
    volumeDir: (v, owner) => pod.volumeDir(v, owner),
    hostIds: (uid, gid) => pod.hostIds(uid, gid),
    async start(c) {
      m.start0 ??= now();
      const running = await pod.start(c);
      m.start1 = now();
      void running.exited.then(() => {
        if (m.exited === undefined) counts.exited++;
        m.exited ??= now();
      });
      return running;
    },
    containers: () => pod.containers(),
    allowPeers: (ips) => pod.allowPeers(ips),
    shell: (o) => pod.shell(o),
    exec: (c, command, signal) => pod.exec(c, command, signal),
    connect: (p) => pod.connect(p),
    usage: () => pod.usage(),
    async destroy(grace) {
      m.destroy0 ??= now();
      await pod.destroy(grace);
      if (m.destroy1 === undefined) counts.destroyed++;
      m.destroy1 ??= now();
    },
  };
}

function timedRuntime(runtime: Runtime): Runtime {
  return {
    description: runtime.description,
    warnings: runtime.warnings,
    hostNames: runtime.hostNames,
    capacity: runtime.capacity,
    async createPod(spec) {
      const m = markOf(spec.jobId);
      m.createPod0 = now();
      counts.created++;
      const pod = await runtime.createPod(spec);
      m.createPod1 = now();
      return timedPod(pod, m);
    },
    recover: () => runtime.recover(),
    close: () => runtime.close(),
  };
}

const home = await mkdtemp(join(values.dir, 'ucompute-local-bench-'));
// As `ucompute serve` lets others pass its data folder (backends/local/open.ts): the sandbox binds
// the host view below it as a container's unprivileged host user.
await chmod(home, 0o711);
const stateDir = join(home, 'local');
const runtime = timedRuntime(
  await createRuntime({
    stateDir: join(stateDir, 'runtime'),
    network: { bridge: BRIDGE },
  }),
);
const backend: LocalBackend = await localBackend({
  runtime,
  stateDir,
  volumes: {
    storageClaim: 'ucompute-storage',
    storageRoot: join(home, 'storage'),
    images: imageResolver({ folders: {}, store: null, hostUserland: true }),
  },
  gracePeriodMs: 500,
});
await mkdir(join(home, 'storage'), { recursive: true });

const waiters = new Map<string, { state: string; resolve: () => void }[]>();
let runningNow = 0;
let peakRunning = 0;
let runningTotal = 0;
let endedTotal = 0;
backend.onEvent((e) => {
  const m = markOf(e.jobId);
  if (e.state === 'RUNNING' && m.running === undefined) {
    m.running = now();
    runningTotal++;
    peakRunning = Math.max(peakRunning, ++runningNow);
  }
  if ((e.state === 'SUCCESS' || e.state === 'FAILURE') && m.ended === undefined) {
    m.ended = now();
    endedTotal++;
    m.state = e.state;
    if (m.running !== undefined) runningNow--;
    if (e.state === 'FAILURE') console.error(`job ${e.jobId} failed: ${e.status}`);
  }
  for (const w of waiters.get(e.jobId) ?? []) {
    if (w.state === e.state || (w.state === 'END' && (e.state === 'SUCCESS' || e.state === 'FAILURE'))) {
      w.resolve();
    }
  }
});

/** Resolves when the job reports `state` ('END': SUCCESS or FAILURE), or rejects after `ms`. */
function waitFor(jobId: string, state: string, ms: number): Promise<void> {
  const m = markOf(jobId);
  if (state === 'END' ? m.ended !== undefined : state === 'RUNNING' && m.running !== undefined) {
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`job ${jobId} did not reach ${state} in ${ms} ms`)), ms);
    const list = waiters.get(jobId) ?? [];
    list.push({
      state,
      resolve: () => {
        clearTimeout(timer);
        resolve();
      },
    });
    waiters.set(jobId, list);
  });
}

function trivialJob(name: string): VolcanoJob {
  return {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    metadata: { name },
    spec: {
      minAvailable: 1,
      tasks: [
        {
          name: 'main',
          replicas: 1,
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [
                {
                  name: 'main',
                  image: 'debian',
                  command: ['true'],
                  resources: {
                    requests: { cpu: '10m', memory: '16Mi' },
                    limits: { cpu: '500m', memory: '64Mi' },
                  },
                },
              ],
            },
          },
        },
      ],
    },
  };
}

async function submit(id: string): Promise<void> {
  markOf(id).submit = now();
  await backend.submitVolcanoJob(id, trivialJob(id));
}

/** /proc/stat's runnable tasks and the machine's busy jiffies (user+nice+system+irq+softirq+steal). */
function procStat(): { runnable: number; busy: number; total: number } {
  const text = readFileSync('/proc/stat', 'utf8');
  const cpu = text.slice(0, text.indexOf('\n')).split(/\s+/).slice(1).map(Number);
  const busy = cpu[0]! + cpu[1]! + cpu[2]! + cpu[5]! + cpu[6]! + cpu[7]!;
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  return { runnable: Number(/procs_running (\d+)/.exec(text)?.[1]), busy, total };
}

/** This process's main thread: ms on a CPU and ms runnable but waiting for one (/proc's schedstat). */
function mainThread(): { onCpu: number; waited: number } {
  const [run, wait] = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ').map(Number);
  return { onCpu: run! / 1e6, waited: wait! / 1e6 };
}

/**
 * Every 100 ms: the batch's pods created, RUNNING, exited, destroyed and jobs ended so far, running now;
 * over the interval, the event loop's utilisation and the shares of it the main thread spent on a CPU
 * and waiting for one (the rest of a busy event loop is blocked in the kernel: synchronous calls
 * that sleep), the runnable tasks and the machine's busy share. Written to TIMELINE (tab-separated)
 * when stopped.
 */
function startTimeline(t0: number): { stop(): void } {
  const lines = [
    'ms\tcreated\trunning\texited\tdestroyed\tended\trunningNow\telu\tmainOnCpu\tmainWaited\trunnable\tmachineBusy',
  ];
  const base = { ...counts, running: runningTotal, ended: endedTotal };
  let elu = performance.eventLoopUtilization();
  let stat = procStat();
  let main = mainThread();
  let at = now();
  const timer = setInterval(() => {
    const e = performance.eventLoopUtilization(elu);
    elu = performance.eventLoopUtilization();
    const m = mainThread();
    const span = Math.max(1, now() - at);
    at = now();
    const onCpu = (m.onCpu - main.onCpu) / span;
    const waited = (m.waited - main.waited) / span;
    main = m;
    const s = procStat();
    const busy = (s.busy - stat.busy) / Math.max(1, s.total - stat.total);
    stat = s;
    lines.push(
      [
        Math.round(now() - t0),
        counts.created - base.created,
        runningTotal - base.running,
        counts.exited - base.exited,
        counts.destroyed - base.destroyed,
        endedTotal - base.ended,
        runningNow,
        e.utilization.toFixed(2),
        onCpu.toFixed(2),
        waited.toFixed(2),
        s.runnable,
        busy.toFixed(2),
      ].join('\t'),
    );
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      writeFileSync(TIMELINE!, `${lines.join('\n')}\n`);
    },
  };
}

// ---- podman -----------------------------------------------------------------------------------

const PODMAN_IMAGE = `localhost/ucompute-bench-true:${process.pid}`;
const podmanNames = `ucompute-bench-${process.pid}`;

function podman(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('podman', args, { timeout: 60_000 }, (error, _stdout, stderr) => {
      if (error) reject(new Error(`podman ${args.join(' ')}: ${String(stderr).trim() || error.message}`));
      else resolve();
    });
  });
}

/**
 * Builds the image (true and the libraries ldd names) and finds podman flags that work here: the
 * OCI runtime crun refuses hybrid cgroups and rlimits above what the host grants, runc does not.
 */
async function preparePodman(): Promise<{ flags: string[] } | { skip: string }> {
  if ((await which('podman')) === null) return { skip: 'podman is not installed' };
  const rootfs = join(home, 'podman-rootfs');
  const files = [
    '/bin/true',
    ...[...execFileSync('ldd', ['/bin/true'], { encoding: 'utf8' }).matchAll(/(\/\S+)/g)].map((m) => m[1]!),
  ];
  for (const file of files) {
    await mkdir(join(rootfs, file, '..'), { recursive: true });
    execFileSync('cp', ['-L', file, join(rootfs, file)]);
  }
  try {
    execFileSync('sh', ['-c', 'tar -C "$1" -c . | podman import -q - "$2"', 'import', rootfs, PODMAN_IMAGE], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (e) {
    return { skip: `podman import failed: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}` };
  }
  const limits = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=4096:4096'];
  const runc = (await which('runc')) !== null ? ['--runtime', 'runc'] : [];
  const candidates = [[], limits, ...(runc.length ? [runc, [...runc, ...limits]] : [])];
  const errors: string[] = [];
  for (const flags of candidates) {
    try {
      await podman(runArgs(flags, ['--rm', PODMAN_IMAGE, '/bin/true']));
      return { flags };
    } catch (e) {
      errors.push((e as Error).message.split('\n').at(-1)!);
    }
  }
  return { skip: `podman cannot run a container here: ${errors.join(' / ')}` };
}

/** `podman [global] run <flags> ...`: --runtime is a global option, the rest belong to run. */
function runArgs(flags: string[], rest: string[]): string[] {
  const global = flags[0] === '--runtime' ? flags.slice(0, 2) : [];
  return [...global, 'run', ...flags.slice(global.length), ...rest];
}

async function cleanPodman(): Promise<void> {
  try {
    const ids = execFileSync('podman', ['ps', '-aq', '--filter', `name=${podmanNames}`], {
      encoding: 'utf8',
    }).trim();
    if (ids) execFileSync('podman', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
    execFileSync('podman', ['rmi', '-f', PODMAN_IMAGE], { stdio: 'ignore' });
  } catch {
    // Nothing of ours left, or podman is absent.
  }
}

// ---- the runs ---------------------------------------------------------------------------------

const rows: string[][] = [];
const breakdown: string[][] = [];
const notes: string[] = [];
const began = now();
const loadAtStart = loadavg()[0]!;
let exitCode = 0;

try {
  console.error(`runtime: ${(runtime as Runtime).description}`);
  // Warm-up: the first pods pay for the bridge's first veths and cold caches.
  for (let i = 0; i < 3; i++) {
    const id = `${PREFIX}-w${i}`;
    await submit(id);
    await waitFor(id, 'END', JOB_TIMEOUT_MS);
  }

  // 1. Latency, one job after the other.
  const latencyIds: string[] = [];
  for (let i = 0; i < LATENCY_JOBS; i++) {
    const id = `${PREFIX}-l${i}`;
    latencyIds.push(id);
    await submit(id);
    await waitFor(id, 'END', JOB_TIMEOUT_MS);
  }
  const lat = latencyIds.map((id) => marks.get(id)!);
  const failed = lat.filter((m) => m.state !== 'SUCCESS').length;
  if (failed > 0) notes.push(`${failed} of the latency jobs did not succeed`);
  const toRunning = lat.map((m) => m.running! - m.submit!);
  const toEnd = lat.map((m) => m.ended! - m.submit!);
  const stages: [string, (m: Marks) => number][] = [
    ['submit → createPod called (controller, state file, scheduler)', (m) => m.createPod0! - m.submit!],
    ['createPod (namespace from the pool, pod.json, cgroups)', (m) => m.createPod1! - m.createPod0!],
    ['createPod done → container start called (hosts, peers)', (m) => m.start0! - m.createPod1!],
    ['pod.start (files, bwrap args, spawn of the supervisor)', (m) => m.start1! - m.start0!],
    ['started → RUNNING event (state file)', (m) => m.running! - m.start1!],
    ['RUNNING → `true` exited (supervisor, bwrap, true)', (m) => m.exited! - m.running!],
    ['exited → pod destroy called', (m) => m.destroy0! - m.exited!],
    ['pod destroy (cgroups, veth and netns removed, folder)', (m) => m.destroy1! - m.destroy0!],
    ['destroyed → SUCCESS event', (m) => m.ended! - m.destroy1!],
  ];

  // 2. Throughput: submit all, wait for all.
  const batchIds = Array.from({ length: JOBS }, (_, i) => `${PREFIX}-t${i}`);
  peakRunning = 0;
  const cpu0 = cpuSeconds();
  const t0 = now();
  const timeline = TIMELINE ? startTimeline(t0) : undefined;
  const elu0 = performance.eventLoopUtilization();
  const main0 = mainThread();
  if (CONCURRENT_SUBMIT) await Promise.all(batchIds.map(submit));
  else for (const id of batchIds) await submit(id);
  const submitted = now();
  await Promise.all(batchIds.map((id) => waitFor(id, 'END', BATCH_TIMEOUT_MS)));
  const wall = (now() - t0) / 1000;
  const cpu1 = cpuSeconds();
  timeline?.stop();
  const loopBusy = performance.eventLoopUtilization(elu0).active / 1000;
  const main1 = mainThread();
  const mainOnCpu = (main1.onCpu - main0.onCpu) / 1000;
  const mainWaited = (main1.waited - main0.waited) / 1000;
  // The same stages for the jobs run together: where a job waits when many start and end at once.
  const batch = batchIds.map((id) => marks.get(id)!);
  for (const [name, of] of stages) {
    const xs = lat.map(of).filter(Number.isFinite);
    const ys = batch.map(of).filter(Number.isFinite);
    breakdown.push([name, f1(pct(xs, 0.5)), f1(pct(xs, 0.99)), f1(pct(ys, 0.5)), f1(pct(ys, 0.99))]);
  }
  notes.push(
    `${JOBS} jobs: ucompute's event loop busy ${f1(loopBusy)} s of ${f1(wall)} s; its main thread ${f1(mainOnCpu)} s on a CPU, ${f1(mainWaited)} s waiting for one, so ~${f1(Math.max(0, loopBusy - mainOnCpu - mainWaited))} s of the busy loop blocked in the kernel (synchronous calls that sleep)`,
  );
  const batchFailed = batchIds.filter((id) => marks.get(id)!.state !== 'SUCCESS').length;
  if (batchFailed > 0) notes.push(`${batchFailed} of the ${JOBS} jobs did not succeed`);
  notes.push(
    `${JOBS} jobs: submitting (${CONCURRENT_SUBMIT ? 'all at once' : 'one after the other'}) took ${f2((submitted - t0) / 1000)} s; at most ${peakRunning} ran at once (capacity ${runtime.capacity.cpuMillis / 1000} CPUs, 10m each); CPU used: ${f1(cpu1.self - cpu0.self)} s by ucompute's process, ${f1(cpu1.children - cpu0.children)} s by its descendants (launcher, supervisors, ip, bwrap, true), of which ${f1(cpu1.launcher - cpu0.launcher)} s by the launcher's own process, in ${f1(wall)} s on ${cpus().length} cores`,
  );

  // 3. podman.
  const podmanStart: number[] = [];
  const podmanRun: number[] = [];
  let podmanWall = Number.NaN;
  let podmanCount = 0;
  const prepared = PODMAN_RUNS > 0 || PODMAN_JOBS > 0 ? await preparePodman() : { skip: 'not asked for' };
  if ('skip' in prepared) {
    notes.push(`podman skipped: ${prepared.skip}`);
  } else {
    const flags = prepared.flags;
    notes.push(
      `podman ${execFileSync('podman', ['--version'], { encoding: 'utf8' }).trim()}, flags: ${flags.join(' ') || 'none'}; default (bridge) network`,
    );
    // Warm-up.
    for (let i = 0; i < 2; i++) await podman(runArgs(flags, ['--rm', PODMAN_IMAGE, '/bin/true']));
    for (let i = 0; i < PODMAN_RUNS; i++) {
      const name = `${podmanNames}-d${i}`;
      let t = now();
      await podman(runArgs(flags, ['-d', '--name', name, PODMAN_IMAGE, '/bin/true']));
      podmanStart.push(now() - t);
      await podman(['rm', '-f', name]);
      t = now();
      await podman(runArgs(flags, ['--rm', '--name', `${podmanNames}-r${i}`, PODMAN_IMAGE, '/bin/true']));
      podmanRun.push(now() - t);
    }
    let next = 0;
    const t1 = now();
    await Promise.all(
      Array.from({ length: PODMAN_CONCURRENCY }, async () => {
        while (next < PODMAN_JOBS) {
          const i = next++;
          await podman(runArgs(flags, ['--rm', '--name', `${podmanNames}-t${i}`, PODMAN_IMAGE, '/bin/true']));
        }
      }),
    );
    podmanWall = (now() - t1) / 1000;
    podmanCount = PODMAN_JOBS;
  }

  // The table.
  /** How many times podman's time is ucompute's. */
  const times = (podmanTime: number, ucomputeTime: number) => podmanTime / ucomputeTime;
  const ratio = (x: number) => (Number.isFinite(x) ? `${f1(x)}×` : '—');
  const startTimes = times(pct(podmanStart, 0.5), pct(toRunning, 0.5));
  const podmanRate = podmanCount / podmanWall;
  const batchTimes = podmanCount > 0 ? times(JOBS / podmanRate, wall) : Number.NaN;
  rows.push([
    'ucompute: submit → RUNNING, 1 replica, sequential',
    int(LATENCY_JOBS),
    f1(pct(toRunning, 0.5)),
    f1(pct(toRunning, 0.99)),
    '',
    '',
    `p50 ≤ ${TARGET.p50} ms, ≥ ${TARGET.startVsPodman}× podman`,
    ratio(startTimes),
  ]);
  rows.push([
    'ucompute: submit → SUCCESS, same jobs',
    int(LATENCY_JOBS),
    f1(pct(toEnd, 0.5)),
    f1(pct(toEnd, 0.99)),
    '',
    '',
    '',
    ratio(times(pct(podmanRun, 0.5), pct(toEnd, 0.5))),
  ]);
  rows.push([
    'podman run -d (returns once started), sequential',
    int(podmanStart.length),
    f1(pct(podmanStart, 0.5)),
    f1(pct(podmanStart, 0.99)),
    '',
    '',
    '',
    '',
  ]);
  rows.push([
    'podman run --rm (returns once removed), sequential',
    int(podmanRun.length),
    f1(pct(podmanRun, 0.5)),
    f1(pct(podmanRun, 0.99)),
    '',
    '',
    '',
    '',
  ]);
  rows.push([
    `ucompute: ${int(JOBS)} jobs, submit all, wait for all`,
    int(JOBS),
    '',
    '',
    f2(wall),
    f1(JOBS / wall),
    `≤ ${TARGET.wallSeconds} s, ≥ ${TARGET.batchVsPodman}× podman`,
    ratio(batchTimes),
  ]);
  const extrapolated = podmanCount > 0 && podmanCount < JOBS;
  if (podmanCount > 0) {
    rows.push([
      `podman run --rm, ${PODMAN_CONCURRENCY} at once`,
      int(podmanCount),
      '',
      '',
      f2(podmanWall),
      f1(podmanRate),
      '',
      '',
    ]);
    if (extrapolated) {
      rows.push([
        `podman: ${int(JOBS)} jobs, extrapolated from its rate`,
        int(JOBS),
        '',
        '',
        f2(JOBS / podmanRate),
        f1(podmanRate),
        '',
        '',
      ]);
    }
  }
  console.log(
    table(
      ['case', 'N', 'p50 ms', 'p99 ms', 'wall s', 'jobs/s', 'target', 'podman time / ucompute time'],
      rows,
      [false, true, true, true, true, true, false, true],
    ),
  );
  console.log();
  console.log(
    table(
      ['stage of a job', 'p50 ms sequential', 'p99 ms sequential', `p50 ms of ${JOBS}`, `p99 ms of ${JOBS}`],
      breakdown,
      [false, true, true, true, true],
    ),
  );
  console.log();
  for (const n of notes) console.log(`- ${n}`);
  console.log(
    `- machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}, load average ${loadAtStart.toFixed(1)} at the start and ${loadavg()[0]!.toFixed(1)} at the end; whole run ${f1((now() - began) / 1000)} s; data folder in ${values.dir}`,
  );
  // A ratio against podman is judged only when podman ran (NaN compares false: not met).
  const met =
    pct(toRunning, 0.5) <= TARGET.p50 &&
    wall <= TARGET.wallSeconds &&
    startTimes >= TARGET.startVsPodman &&
    batchTimes >= TARGET.batchVsPodman;
  console.log(
    `- issue 18's targets ${met ? 'met' : 'NOT met'}${podmanCount > 0 ? '' : ' (podman did not run)'}`,
  );
} catch (error) {
  console.error(error);
  exitCode = 1;
} finally {
  for (const id of await backend.knownJobs()) await backend.cancel(id);
  await backend.close();
  await removeBridgeNetwork(BRIDGE);
  await cleanPodman();
  await rm(home, { recursive: true, force: true });
}
process.exit(exitCode);
