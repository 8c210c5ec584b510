/**
 * The Kubernetes backend on the real cluster of scripts/cluster.sh (issue 17): N one-replica jobs
 * submitted through ucompute's API, against the same N Volcano Jobs (the manifest `ucompute plan`
 * prints for that job) created directly with client-node, in the same run — each side on a fresh
 * cluster of its own, both at the same time by default (the same machine load for both: a fair
 * ratio; nothing is deleted between the sides). Jobs are test/cluster/apps' sim-batch: KWOK runs
 * each for --run-time (by default longer than the run), so all N are live at once when the last
 * one runs: the API requests counted are those on the path to Running only, and the RSS is
 * ucompute's with N live jobs. Hence N one-CPU jobs must fit (--nodes × --node-cpu ≥ --jobs).
 *
 * Reported per side: submit → RUNNING p50/p99 (RUNNING: the Volcano Job's phase for the direct
 * side, ucompute's job state for ucompute's), jobs RUNNING per second (overall and within each
 * tenth of the N: how the rate moves as live jobs grow), the cluster's CPU per job by component;
 * for ucompute also its API requests per job (the API server's audit log of its ServiceAccount,
 * watches apart, by verb), its CPU ms per job and its RSS with the N jobs live (when the last ran,
 * after --hold-seconds more, and its largest sample). A progress line every minute says how far
 * each side is, with KWOK's pod starts ("Patch pod" lines of its log: a stalled KWOK shows +0 while
 * bound pods wait); SIGINT/SIGTERM or --timeout-minutes stop the wait and report what each side has.
 * A side whose KWOK started no pod for --restart-stalled-kwok minutes while its jobs waited gets
 * KWOK restarted (bench/kwok-watchdog.ts says why); each side reports its restarts (kwokRestarts).
 *
 *   node bench/cluster.bench.ts [--jobs 10000] [--nodes 100] [--node-cpu 128] [--run-time 3h]
 *       [--one-at-a-time]            (the sides one after the other, each on a fresh cluster)
 *       [--sides both|ucompute|direct]   (one side alone: its own figures, no ratio; default both)
 *       [--schedule-period 1s] [--apiserver-gogc N]   (harness flags, alike for both clusters)
 *       [--hold-seconds 60] [--timeout-minutes 120] [--restart-stalled-kwok 3 (minutes; 0: never)]
 *       [--help]
 *
 * Per side also: when the k-th tenth of the N ran (byTenth: time since the first submission and
 * the rate within that tenth, with that many jobs live) and where the time went (stages: submit →
 * a pod Running → the Volcano Job Running → RUNNING), from a watch of its cluster's Volcano Jobs
 * and pods (lists paged, and retried after a failure: a 504 under load must not blind a side).
 * Per-job figures are over the jobs that reached RUNNING; for a stopped run, also over the jobs
 * submitted (or Volcano Jobs created). The end-to-end ratio is lastRunningRatio: ucompute's time
 * to its N-th RUNNING job over the direct side's. ucompute's RUNNING comes from its event stream;
 * when the stream says `resync` (the bench fell behind), or a job is still not seen RUNNING 2 min
 * after every Volcano Job runs, the bench reads the list of RUNNING jobs: such jobs count at the
 * time of that read, and seenRunningByReading says how many (each is logged with its updates).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '../src/cli/format.ts';
import { ROOT } from '../test/support/paths.ts';
import { cpuMsOf, directSide, type SideOptions, ucomputeSide } from './cluster-sides.ts';
import { Timeline } from './cluster-timeline.ts';
import { type KwokMinute, kwokStalled } from './kwok-watchdog.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    nodes: { type: 'string', default: '100' },
    'node-cpu': { type: 'string', default: '128' },
    'run-time': { type: 'string', default: '3h' },
    'one-at-a-time': { type: 'boolean', default: false },
    sides: { type: 'string', default: 'both' },
    'schedule-period': { type: 'string' },
    'apiserver-gogc': { type: 'string' },
    'hold-seconds': { type: 'string', default: '60' },
    'timeout-minutes': { type: 'string', default: '120' },
    'restart-stalled-kwok': { type: 'string', default: '3' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  const text = await readFile(new URL(import.meta.url), 'utf8');
  console.log(/\/\*\*\n([\s\S]*?)\*\//.exec(text)![1]!.replace(/^ \* ?/gm, ''));
  process.exit(0);
}
const JOBS = Number(values.jobs);
if (!['both', 'ucompute', 'direct'].includes(values.sides!))
  throw new Error(`--sides ${values.sides}: both, ucompute or direct`);
if (JOBS > Number(values.nodes) * Number(values['node-cpu']))
  throw new Error(
    `--jobs ${JOBS} one-CPU jobs do not fit on --nodes × --node-cpu CPUs: all must run at once`,
  );
const SPEC = {
  application: { name: 'sim-batch', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: { runTime: { type: 'text', value: values['run-time'] } },
  // As long as the jobs run: with the tool's default (1 h) ucompute expires the first jobs of a
  // longer run, and "N live jobs" no longer holds at the end.
  timeAllocation: parseDuration(values['run-time']!, '--run-time'),
};
const script = join(ROOT, 'scripts/cluster.sh');
const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/**
 * Settles (with the reason) on SIGINT/SIGTERM, after --timeout-minutes, or when the other side
 * failed: the sides stop waiting and report what they have.
 */
let stop!: (why: string) => void;
const stopped = new Promise<string>((resolve) => {
  stop = resolve;
});
setTimeout(
  () => stop(`stopped after --timeout-minutes ${values['timeout-minutes']}`),
  Number(values['timeout-minutes']) * 60_000,
).unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop(`stopped by ${signal}`));

/** Runs scripts/cluster.sh with `args`, its output on our stderr. */
function cluster(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(script, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`scripts/cluster.sh ${args[0]}: ${code}`)),
    );
  });
}
const upArgs = [
  ...['--nodes', values.nodes!, '--node-cpu', values['node-cpu']!, '--node-memory', '512Gi'],
  ...(values['schedule-period'] ? ['--schedule-period', values['schedule-period']] : []),
  ...(values['apiserver-gogc'] ? ['--apiserver-gogc', values['apiserver-gogc']] : []),
];

const COMPONENTS = [
  'kube-apiserver',
  'etcd',
  'volcano-scheduler',
  'volcano-controller-manager',
  'volcano-webhook-manager',
  'kwok',
  'kube-controller-manager',
];
/** Each component's CPU ms so far. */
async function clusterCpu(dir: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const c of COMPONENTS) {
    const pid = Number(await readFile(join(dir, 'run', `${c}.pid`), 'utf8').catch(() => 'NaN'));
    out[c] = await cpuMsOf(pid).catch(() => NaN);
  }
  return out;
}

interface Side {
  name: 'direct' | 'ucompute';
  dir: string;
  cpuAtStart?: Record<string, number>;
  timeline?: Timeline;
  /** Jobs running at the last progress line. */
  runningBefore?: number;
  /** KWOK's "Patch pod" lines so far (each a pod status it played: here, a pod started). */
  kwokPatches?: number;
  kwokPatchesBefore?: number;
  /** How far KWOK's log has been read. */
  kwokLogRead?: number;
  /** The minutes since KWOK (re)started, for the watchdog. */
  kwokHistory: KwokMinute[];
  /** When the watchdog restarted KWOK (minutes into the run) and what the side had then. */
  kwokRestarts: { afterMinutes: number; progress: string }[];
}

/** Counts the "Patch pod" lines KWOK logged since the last call (its log only grows). */
async function countKwokPatches(side: Side) {
  const file = await open(join(side.dir, 'logs', 'kwok.log')).catch(() => undefined);
  if (!file) return;
  try {
    const { size } = await file.stat();
    const from = side.kwokLogRead ?? 0;
    if (size <= from) return;
    const buffer = Buffer.alloc(size - from);
    await file.read(buffer, 0, buffer.length, from);
    // Whole lines only: a line being written is counted at the next call.
    const end = buffer.lastIndexOf(10) + 1;
    const text = buffer.subarray(0, end).toString('utf8');
    side.kwokPatches = (side.kwokPatches ?? 0) + (text.match(/"msg":"Patch pod"/g)?.length ?? 0);
    side.kwokLogRead = from + end;
  } finally {
    await file.close();
  }
}

/** One side on its own fresh cluster: up, the side, its cluster's CPU per job, down. */
async function runSide(side: Side, run: (o: SideOptions) => Promise<object>, work: string) {
  try {
    await cluster(['up', side.dir, ...upArgs]);
    side.cpuAtStart = await clusterCpu(side.dir);
    side.timeline = new Timeline(JOBS);
    const summary = await run({
      cluster: side.dir,
      jobs: JOBS,
      spec: SPEC,
      work: join(work, side.name),
      stopped,
      holdMs: Number(values['hold-seconds']) * 1000,
      timeline: side.timeline,
    });
    const cpuNow = await clusterCpu(side.dir);
    // Over the jobs that reached RUNNING, and (a stopped run) over the jobs submitted.
    const perJob = (n: number) => {
      const each = Object.fromEntries(
        COMPONENTS.map((c) => [c, Math.round((cpuNow[c]! - side.cpuAtStart![c]!) / Math.max(1, n))]),
      );
      return { total: Object.values(each).reduce((a, b) => a + b, 0), ...each };
    };
    return {
      ...summary,
      clusterCpuMsPerJob: perJob(side.timeline.running.size),
      clusterCpuMsPerJobSubmitted: perJob(side.timeline.submitted.size),
    };
  } catch (e) {
    stop(`stopped: the ${side.name} side failed (${(e as Error).message})`);
    throw e;
  } finally {
    await cluster(['down', side.dir]).catch((e: unknown) => console.error(e));
  }
}

const work = await mkdtemp(join(os.tmpdir(), 'ucompute-cluster-bench-'));
const sides: Side[] = (
  [
    { name: 'direct', dir: join(work, 'cluster-direct'), kwokHistory: [], kwokRestarts: [] },
    { name: 'ucompute', dir: join(work, 'cluster-ucompute'), kwokHistory: [], kwokRestarts: [] },
  ] satisfies Side[]
).filter((s) => values.sides === 'both' || s.name === values.sides);
const RUN = { direct: directSide, ucompute: ucomputeSide };
const started = performance.now();
const STALL_MINUTES = Number(values['restart-stalled-kwok']);

/** Adds the side's last minute to its KWOK history, and restarts a stalled KWOK (counted). */
async function watchKwok(side: Side, podStarts: number, timeline: Timeline) {
  side.kwokHistory.push({ podStarts, waiting: timeline.submitted.size - timeline.running.size });
  if (!kwokStalled(side.kwokHistory, STALL_MINUTES)) return;
  const afterMinutes = Math.round((performance.now() - started) / 60_000);
  console.error(
    `${side.name}: KWOK started no pod for ${STALL_MINUTES} min while jobs waited: restarting it`,
  );
  side.kwokRestarts.push({ afterMinutes, progress: timeline.progress() });
  side.kwokHistory = [];
  await cluster(['restart', side.dir, 'kwok']).catch((e: unknown) => console.error(e));
}
const progress = setInterval(async () => {
  const parts: string[] = [];
  for (const s of sides) {
    const cpu = s.cpuAtStart ? await clusterCpu(s.dir).catch(() => undefined) : undefined;
    const cpuS = (c: string) => (cpu && s.cpuAtStart ? Math.round((cpu[c]! - s.cpuAtStart[c]!) / 1000) : NaN);
    const running = s.timeline?.running.size ?? 0;
    const lastMinute = running - (s.runningBefore ?? 0);
    s.runningBefore = running;
    await countKwokPatches(s).catch(() => undefined);
    const patches = s.kwokPatches ?? 0;
    const patchesLastMinute = patches - (s.kwokPatchesBefore ?? 0);
    s.kwokPatchesBefore = patches;
    if (s.timeline) await watchKwok(s, patchesLastMinute, s.timeline);
    parts.push(
      `${s.name}: ${s.timeline?.progress() ?? 'starting'} (+${lastMinute} RUNNING in the last minute)` +
        ` (KWOK pod starts ${patches}, +${patchesLastMinute})` +
        ` (CPU s: apiserver ${cpuS('kube-apiserver')}, scheduler ${cpuS('volcano-scheduler')}, controller ${cpuS('volcano-controller-manager')})`,
    );
  }
  console.error(
    `progress ${Math.round((performance.now() - started) / 60_000)} min, load ${load()}: ${parts.join('; ')}`,
  );
}, 60_000);

const loadAtStart = load();
const results: Record<string, object> = {};
try {
  if (values['one-at-a-time']) {
    for (const s of sides) results[s.name] = await runSide(s, RUN[s.name], work);
  } else {
    // All settle before anything is reported: a side that failed stops the other, whose
    // cluster is downed before this ends.
    const settled = await Promise.allSettled(sides.map((s) => runSide(s, RUN[s.name], work)));
    for (const r of settled) if (r.status === 'rejected') throw r.reason;
    sides.forEach((s, i) => {
      results[s.name] = (settled[i] as PromiseFulfilledResult<object>).value;
    });
  }
  for (const s of sides) results[s.name] = { ...results[s.name], kwokRestarts: s.kwokRestarts };
} finally {
  clearInterval(progress);
  await rm(work, { recursive: true, force: true });
}
type Summary = { p50Ms: number; p99Ms: number; lastRunningAfterMs: number; running: number };
const d = results.direct as Summary | undefined;
const u = results.ucompute as Summary | undefined;
const both = d && u;
console.log(
  JSON.stringify(
    {
      commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(),
      jobs: JOBS,
      nodes: `${values.nodes} x ${values['node-cpu']} CPU`,
      runTime: values['run-time'],
      sides:
        sides.length === 1
          ? `${sides[0]!.name} alone`
          : values['one-at-a-time']
            ? 'one after the other'
            : 'at the same time',
      harness: {
        schedulePeriod: values['schedule-period'] ?? '1s',
        apiserverGogc: values['apiserver-gogc'] ?? 'default',
        restartStalledKwokAfterMinutes: STALL_MINUTES,
      },
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: load(),
      direct: results.direct,
      ucompute: results.ucompute,
      // Meaningful only when both sides ran all N (a stopped run compares different jobs).
      allRan: [d, u].every((s) => s === undefined || s.running === JOBS),
      ...(both && {
        lastRunningRatio: Math.round((u.lastRunningAfterMs / d.lastRunningAfterMs) * 100) / 100,
        p50Ratio: Math.round((u.p50Ms / d.p50Ms) * 100) / 100,
        p99Ratio: Math.round((u.p99Ms / d.p99Ms) * 100) / 100,
      }),
    },
    null,
    2,
  ),
);
