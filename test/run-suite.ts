// The test suite's runner (`npm test` runs it with `--check`): every `test/**/*.test.ts` in a
// `node --test` process, longest first (the order of test/durations.json, measured; files not in it
// after them), one more at a time than the machine has cores (a file uses about half a core: it
// waits on its servers, pods and processes), with the browser files (Chromium) in a lane of their
// own beside the rest so that two Chromiums never share the cores: one process, one Chromium. Small files that may share a process (see
// `shareable`) run in batches, several files in one `node --test --test-isolation=none` process:
// each Node and its imports (~0.5 CPU-s a file) are paid once per batch. A file's or batch's output
// is printed whole when it ends, with the files that failed named; the exit code is 1 when any did.
//
//   node test/run-suite.ts [files…]        run these files (default: all)
//   --concurrency=N         processes at a time, the browser lane included (default: cores + 1)
//   --fill=N                up to N processes more than --concurrency while the machine's cores sit
//                           idle (under 75 % busy, all its processes counted, 3 s in a row; default
//                           2; 0: never): the files that wait on servers and pods leave cores unused
//   --browser-lane=N        the browser lane's slots (default 1: the browser files one after the
//                           other in one process of their own, or each alone with --batch=0; 0: each
//                           alone in the common pool)
//   --order=durations|alpha longest first (default) or the old `node --test` order
//   --isolation=none|process  each file's tests in its `node --test` process itself (default:
//                           `--test-isolation=none`, one Node less per file) or in a child of it
//   --batch=SECONDS         files that may share a process, in batches of about this many seconds
//                           of test/durations.json's walls (default 60; 0: every file in a process of its own)
//   --check                 also run `npm run check` (package.json's type-checks, lint and format
//                           check) as a task of the pool, first, beside the first files: its failure
//                           fails the run as a file's does (`npm test` runs the suite so)
//   --list                  print the processes (batches, and why each other file runs alone); run none
//   --profile=DIR           also measure: each file in a cgroup v2 group of its own (CPU time of the
//                           file and everything it starts), the cores' use every second;
//                           writes DIR/profile.json and DIR/summary.txt
//   --cpu-prof=DIR          V8's CPU profile of each test process (not of what it starts):
//                           DIR/<file or batch's first file>/*.cpuprofile; split them by what the
//                           process did with `node bench/cpuprofile-split.ts DIR`
//   --write-durations       rewrite test/durations.json from this run's wall times and, with
//                           --profile, CPU times (a batch's CPU split by its files' seconds)
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  globSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { newHostView, SUITE_HOST_VIEW } from './support/host-view.ts';

const root = join(import.meta.dirname, '..');
// The test processes keep what Node compiled (the sources with their types stripped) in a cache, as
// `npm test` sets it, also when the runner is started by itself: 16 small files in one process
// took 3.0 CPU-s with the cache, 3.4–3.8 without (2 alternated pairs, load ~6).
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'node-compile-cache');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    concurrency: { type: 'string', default: String(availableParallelism() + 1) },
    'browser-lane': { type: 'string', default: '1' },
    fill: { type: 'string', default: '2' },
    order: { type: 'string', default: 'durations' },
    isolation: { type: 'string', default: 'none' },
    batch: { type: 'string', default: '60' },
    check: { type: 'boolean', default: false },
    list: { type: 'boolean', default: false },
    profile: { type: 'string' },
    'cpu-prof': { type: 'string' },
    'write-durations': { type: 'boolean', default: false },
  },
});
const concurrency = Math.max(1, Number(values.concurrency));
const browserLane = Math.max(0, Number(values['browser-lane']));
if (values.isolation !== 'none' && values.isolation !== 'process')
  throw new Error(`--isolation is none or process, not ${values.isolation}`);
const isolation = `--test-isolation=${values.isolation}`;
const durationsFile = join(root, 'test/durations.json');
const cpuProfDir = values['cpu-prof'] ? resolve(values['cpu-prof']) : undefined;

const all = (positionals.length > 0 ? positionals : globSync('test/**/*.test.ts', { cwd: root }))
  .map((f) => relative(root, resolve(root, f)))
  .sort();
/** Each file's measured wall and CPU seconds (CPU: the file and all it starts, in its cgroup). */
const measured: Record<string, { wall: number; cpu?: number }> = existsSync(durationsFile)
  ? JSON.parse(readFileSync(durationsFile, 'utf8'))
  : {};
const known: Record<string, number> = Object.fromEntries(
  Object.entries(measured).map(([f, m]) => [f, m.wall]),
);
const files =
  values.order === 'alpha'
    ? all
    : [...all].sort((a, b) => (known[b] ?? 0) - (known[a] ?? 0) || (a < b ? -1 : 1));
const isBrowser = (f: string) => f.startsWith('test/browser/');
const batchSeconds = Math.max(0, Number(values.batch));

// Whether a file may share a process with others (`--test-isolation=none`: one module graph, one
// root test, its files imported one after the other before any test runs). Not: the browser files
// (a Chromium and a server each), files with no measured CPU time or a large one (serve-, pod- or
// cluster-heavy: a file's wall under load says little, its CPU time what it costs), and files
// whose source does what leaks into the next file.
const MAX_SHARED_CPU_SECONDS = 8;
const ALONE: [RegExp, string][] = [
  // On the root test in a shared process: every `before` runs ahead of the whole batch, every
  // `after` at its end, `beforeEach`/`afterEach` around the other files' tests too.
  [/^(?:before|after|beforeEach|afterEach)\(/m, 'top-level hooks'],
  // The store's prepared statements are a table of the process (at most 200): a file that changes a
  // table under them needs them prepared by itself, not already by the files before it.
  [
    /^(?=[\s\S]*support\/postgres\.ts')[\s\S]*\balter table\b/,
    'PostgreSQL table changed under prepared statements',
  ],
  [
    /process\.(?:on|once|chdir|umask)\(|process\.env(?:\.\w+|\[[^\]]+\])\s*=[^=]|delete process\.env/,
    'process state',
  ],
  [/import \{[^}]*\bmock\b[^}]*\} from 'node:test'/, 'module-level mocks'],
];
/**
 * The files of the PostgreSQL support share batches of their own: one server per process (started on
 * first use, stopped at exit; a database per test), so per batch rather than per file.
 */
const usesPostgres = (file: string) => /support\/postgres\.ts'/.test(readFileSync(join(root, file), 'utf8'));
/**
 * The browser files share one process of their own, in the browser lane, one after the other: the
 * process's first browser file starts its Chromium and the others use it (test/support/chromium.ts;
 * all 7 in one process: 139 vs 161 CPU-s in the browser engineer's pair of 05:40).
 */
const browserTogether = browserLane > 0;
function aloneBecause(file: string): string | undefined {
  const source = () => readFileSync(join(root, file), 'utf8');
  if (isBrowser(file))
    return browserTogether ? ALONE.find(([pattern]) => pattern.test(source()))?.[1] : 'browser';
  const cpu = measured[file]?.cpu;
  if (cpu === undefined) return 'no measured CPU time';
  if (cpu > MAX_SHARED_CPU_SECONDS) return `${cpu} CPU-s`;
  return ALONE.find(([pattern]) => pattern.test(source()))?.[1];
}

/** What one `node --test` process runs: one file, or a batch of files that may share it. */
interface Unit {
  name: string;
  files: string[];
  seconds: number;
  /** A batch's kind: its files all use the PostgreSQL support, or none does; browser files or none. */
  postgres?: boolean;
  browser?: boolean;
  /** Not a test file: this shell command (`npm run check`'s), run in the checkout. */
  command?: string;
}
const units: Unit[] = [];
const shared = batchSeconds > 0 ? files.filter((f) => aloneBecause(f) === undefined) : [];
for (const file of files)
  if (!shared.includes(file)) units.push({ name: file, files: [file], seconds: known[file] ?? 0 });
// First fit, longest first: batches of about `batchSeconds` of measured time each; the browser
// files in one.
const batches: Unit[] = [];
for (const file of shared) {
  const seconds = known[file] ?? 0;
  const postgres = usesPostgres(file);
  const browser = isBrowser(file);
  let batch = batches.find(
    (b) =>
      b.postgres === postgres && b.browser === browser && (browser || b.seconds + seconds <= batchSeconds),
  );
  if (!batch) {
    batch = { name: '', files: [], seconds: 0, postgres, browser };
    batches.push(batch);
  }
  batch.files.push(file);
  batch.seconds += seconds;
}
batches.forEach((b, i) => {
  b.name = b.files.length > 1 ? `batch ${i + 1} (${b.files.length} files)` : b.files[0]!;
});
units.push(...batches);
if (values.order !== 'alpha') units.sort((a, b) => b.seconds - a.seconds || (a.name < b.name ? -1 : 1));
// `npm run check` first, in the common pool: ~25 s of type-checks (one core) while the first files
// mostly wait on their servers, rather than before the suite starts.
if (values.check) {
  const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts as Record<
    string,
    string
  >;
  units.unshift({ name: 'npm run check', files: [], seconds: 0, command: scripts.check! });
}
const reporter = join(root, 'test/suite-reporter.ts');
if (values.list) {
  for (const u of units)
    console.log(
      u.command
        ? `${u.name}: ${u.command}`
        : u.files.length > 1
          ? `${u.name}, ${u.seconds.toFixed(1)} s: ${u.files.join(' ')}`
          : `${u.name}, ${u.seconds.toFixed(1)} s: alone (${batchSeconds > 0 ? (aloneBecause(u.name) ?? 'batch of one') : '--batch=0'})`,
    );
  process.exit(0);
}

interface Result {
  /** The file, or the batch's name. */
  file: string;
  /** A batch's files, and each one's seconds (its top-level tests' durations). */
  files?: Record<string, number>;
  start: number;
  end: number;
  code: number | null;
  cpu?: { user: number; system: number };
  leftover?: number;
  /** `npm run check`, not a test file. */
  command?: boolean;
}

// One filtered copy of /etc for all the local runtimes the files make (test/support/host-view.ts),
// made before any file starts and removed when the runner exits, where each test process made
// one for itself.
process.env[SUITE_HOST_VIEW] = await newHostView();

const t0 = Date.now();
const results: Result[] = [];
const running = new Map<string, { start: number; group?: string }>();
const failed: string[] = [];

// --- profile: one cgroup v2 group per file (pods move only in v1 hierarchies, so they stay counted)
const unified = '/sys/fs/cgroup/unified';
const cgroupRoot =
  values.profile && existsSync(join(unified, 'cgroup.procs'))
    ? join(unified, `ucompute-suite-${process.pid}`)
    : null;
if (values.profile) {
  mkdirSync(values.profile, { recursive: true });
  if (cgroupRoot) mkdirSync(cgroupRoot);
  else console.error('run-suite: no cgroup v2 hierarchy: the profile has wall times only');
}
function cpuOf(group: string): { user: number; system: number; usage: number } {
  const text = readFileSync(join(group, 'cpu.stat'), 'utf8');
  const get = (k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(text)?.[1] ?? 0) / 1e6;
  return { user: get('user_usec'), system: get('system_usec'), usage: get('usage_usec') };
}
function machineTicks(): { busy: number; total: number } {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = cpu.reduce((s, v) => s + v, 0);
  const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
  return { busy: total - idle, total };
}
const samples: { t: number; ours: number; machine: number; load: number; running: string[] }[] = [];
let sampler: NodeJS.Timeout | undefined;
if (values.profile) {
  let lastTicks = machineTicks();
  let lastOurs = 0;
  const finishedCpu = () => results.reduce((s, r) => s + (r.cpu ? r.cpu.user + r.cpu.system : 0), 0);
  let lastT = Date.now();
  sampler = setInterval(() => {
    const now = Date.now();
    let ours = finishedCpu();
    for (const r of running.values()) if (r.group) ours += safeUsage(r.group);
    const ticks = machineTicks();
    samples.push({
      t: (now - t0) / 1000,
      ours: (ours - lastOurs) / ((now - lastT) / 1000),
      machine: ((ticks.busy - lastTicks.busy) / Math.max(1, ticks.total - lastTicks.total)) * 2,
      load: Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]),
      running: [...running.keys()],
    });
    lastTicks = ticks;
    lastOurs = ours;
    lastT = now;
  }, 1000);
}
function safeUsage(group: string): number {
  try {
    return cpuOf(group).usage;
  } catch {
    return 0;
  }
}

function runUnit(unit: Unit): Promise<void> {
  return new Promise((resolve) => {
    const start = Date.now();
    const batch = unit.files.length > 1;
    const key = (unit.files[0] ?? unit.name).replaceAll('/', '_').replaceAll(' ', '-');
    const events = batch ? join(tmpdir(), `ucompute-suite-${process.pid}-${start}-${key}.jsonl`) : '';
    const nodeArgs = batch
      ? [
          '--test',
          '--test-isolation=none',
          '--test-reporter=spec',
          '--test-reporter-destination=stdout',
          `--test-reporter=${reporter}`,
          `--test-reporter-destination=${events}`,
          ...unit.files,
        ]
      : ['--test', isolation, ...unit.files];
    // The profile of the test process itself (a flag of this `node`, not NODE_OPTIONS: the servers,
    // CLI calls and pods it starts are not profiled).
    if (cpuProfDir && !unit.command)
      nodeArgs.unshift('--cpu-prof', `--cpu-prof-dir=${join(cpuProfDir, key)}`);
    let group: string | undefined;
    let command = process.execPath;
    let args = nodeArgs;
    if (unit.command) {
      command = '/bin/sh';
      args = ['-c', unit.command];
    }
    if (cgroupRoot) {
      group = join(cgroupRoot, key);
      mkdirSync(group);
      // The shell joins the group before it becomes `node`, so that all it starts is counted.
      args = ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', group, command, ...args];
      command = '/bin/sh';
    }
    running.set(unit.name, { start, ...(group ? { group } : {}) });
    // A command finds the checkout's tools (tsc, biome) as `npm run` would.
    const env = unit.command
      ? { ...process.env, PATH: `${join(root, 'node_modules/.bin')}:${process.env.PATH ?? ''}` }
      : process.env;
    const child = spawn(command, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => out.push(d));
    child.on('close', (code) => {
      const end = Date.now();
      running.delete(unit.name);
      const result: Result = { file: unit.name, start: (start - t0) / 1000, end: (end - t0) / 1000, code };
      // A batch: which of its files failed, and how long each one's tests took.
      const failedFiles = new Set<string>();
      if (batch) {
        const ms: Record<string, number> = Object.fromEntries(unit.files.map((f) => [f, 0]));
        const lines = existsSync(events) ? readFileSync(events, 'utf8').split('\n').filter(Boolean) : [];
        for (const line of lines) {
          const event = JSON.parse(line) as { ok: boolean; file?: string; ms: number };
          const file = event.file ? relative(root, event.file) : unit.name;
          ms[file] = (ms[file] ?? 0) + event.ms;
          if (!event.ok) failedFiles.add(file);
        }
        rmSync(events, { force: true });
        result.files = Object.fromEntries(Object.entries(ms).map(([f, v]) => [f, Math.round(v / 100) / 10]));
      }
      // A failure no test of the batch reported (an error between tests): the batch's files are named.
      if (code !== 0 && failedFiles.size === 0) for (const f of unit.files) failedFiles.add(f);
      if (unit.command) result.command = true;
      if (group) {
        const cpu = cpuOf(group);
        result.cpu = { user: cpu.user, system: cpu.system };
        try {
          result.leftover = readFileSync(join(group, 'cgroup.procs'), 'utf8')
            .split('\n')
            .filter(Boolean).length;
          rmdirSync(group);
        } catch {
          // Processes the file left behind keep the group; reported as leftover.
        }
      }
      results.push(result);
      if (values.profile)
        appendFileSync(join(values.profile, 'results.jsonl'), `${JSON.stringify(result)}\n`);
      const seconds = ((end - start) / 1000).toFixed(1);
      process.stdout.write(Buffer.concat(out));
      if (batch) {
        const where = `in ${unit.name}: ${unit.files.join(' ')}`;
        for (const f of failedFiles) failed.push(`${f} (${where})`);
        console.log(`# ${code === 0 ? 'ok' : 'FAILED'} ${unit.name} (${seconds} s): ${unit.files.join(' ')}`);
        for (const f of failedFiles) console.log(`# FAILED ${f}`);
        console.log('');
      } else {
        if (code !== 0) failed.push(unit.name);
        console.log(`# ${code === 0 ? 'ok' : 'FAILED'} ${unit.name} (${seconds} s)\n`);
      }
      resolve();
    });
  });
}

async function pool(queue: Unit[], slots: number): Promise<void> {
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await runUnit(next);
  };
  await Promise.all(Array.from({ length: slots }, worker));
}

// The browser lane takes `browserLane` slots; the common pool the rest, and the browser lane's
// slots once its queue is empty (one shared queue when the lane is off).
const browser = browserLane > 0 ? units.filter((u) => u.files[0] !== undefined && isBrowser(u.files[0])) : [];
const common = units.filter((u) => !browser.includes(u));
const lane = Math.min(browserLane, browser.length, concurrency - 1);
if (browser.length > 0 && lane === 0) common.unshift(...browser);
// Filling idle cores: one more of the common queue's units each time the machine (everyone's
// processes, not only the suite's) used under FILL_BELOW of its cores for 3 s in a row, up to
// `fill` at a time. On a loaded machine this starts none.
const fill = Math.max(0, Number(values.fill));
const FILL_BELOW = 0.75;
const filled: Promise<void>[] = [];
let filling = 0;
let filler: NodeJS.Timeout | undefined;
if (fill > 0) {
  let last = machineTicks();
  const recent: number[] = [];
  filler = setInterval(() => {
    const ticks = machineTicks();
    recent.push((ticks.busy - last.busy) / Math.max(1, ticks.total - last.total));
    last = ticks;
    if (recent.length > 3) recent.shift();
    if (recent.length < 3 || Math.max(...recent) >= FILL_BELOW || filling >= fill) return;
    const next = common.shift();
    if (next === undefined) return;
    filling++;
    recent.length = 0;
    filled.push(
      runUnit(next).finally(() => {
        filling--;
      }),
    );
  }, 1000);
}
await Promise.all([
  pool(common, concurrency - lane),
  lane > 0 ? pool(browser, lane).then(() => pool(common, lane)) : Promise.resolve(),
]);
if (filler) clearInterval(filler);
await Promise.all(filled);
if (sampler) clearInterval(sampler);

const wall = (Date.now() - t0) / 1000;
console.log(
  `# ${files.length} files in ${units.filter((u) => !u.command).length} processes (${batches.filter((b) => b.files.length > 1).length} batches), ${failed.length} failed, ${wall.toFixed(1)} s`,
);
for (const f of failed) console.log(`# FAILED ${f}`);

if (values['write-durations']) {
  // A batch's files: each one's tests' time (at least 0.1 s, so that it stays measured), and the
  // batch's CPU split by those times. Files this run did not run keep what they had.
  const durations = { ...measured };
  for (const r of results.filter((r) => !r.command)) {
    const cpu = r.cpu ? r.cpu.user + r.cpu.system : undefined;
    const parts = r.files
      ? Object.entries(r.files).map(([f, s]): [string, number] => [f, Math.max(0.1, s)])
      : [[r.file, Math.round((r.end - r.start) * 10) / 10] as [string, number]];
    const total = parts.reduce((sum, [, s]) => sum + s, 0);
    for (const [f, wall] of parts)
      durations[f] = {
        wall,
        ...(cpu !== undefined
          ? { cpu: Math.round((cpu * wall * 10) / total) / 10 }
          : durations[f]?.cpu !== undefined
            ? { cpu: durations[f].cpu }
            : {}),
      };
  }
  const sorted = Object.entries(durations).sort((a, b) => b[1].wall - a[1].wall);
  writeFileSync(
    durationsFile,
    // One line a file, as Biome formats it.
    `{\n${sorted
      .map(
        ([f, m]) =>
          `  ${JSON.stringify(f)}: { ${Object.entries(m)
            .map(([k, v]) => `"${k}": ${v}`)
            .join(', ')} }`,
      )
      .join(',\n')}\n}\n`,
  );
}
if (values.profile) {
  const cpuSum = results.reduce((s, r) => s + (r.cpu ? r.cpu.user + r.cpu.system : 0), 0);
  const idleSeconds = samples.filter((s) => s.ours < 1).length;
  const loads = samples.map((s) => s.load);
  const lines = [
    `wall ${wall.toFixed(1)} s, CPU of the files ${cpuSum.toFixed(1)} s (${(cpuSum / wall).toFixed(2)} cores on average)`,
    `seconds with the files using < 1 core: ${idleSeconds} of ${samples.length}; load ${Math.min(...loads)}–${Math.max(...loads)}`,
    'file                                         wall s   cpu s  start    end  leftover',
    ...[...results]
      .sort((a, b) => b.end - b.start - (a.end - a.start))
      .map(
        (r) =>
          `${r.file.padEnd(44)} ${(r.end - r.start).toFixed(1).padStart(6)} ${(r.cpu ? r.cpu.user + r.cpu.system : 0).toFixed(1).padStart(7)} ${r.start.toFixed(0).padStart(6)} ${r.end.toFixed(0).padStart(6)} ${String(r.leftover ?? '').padStart(3)}${r.code === 0 ? '' : ' FAILED'}`,
      ),
  ];
  for (const r of results.filter((r) => r.files))
    lines.push(
      `${r.file}: ${Object.entries(r.files!)
        .map(([f, s]) => `${f} ${s} s`)
        .join(', ')}`,
    );
  writeFileSync(join(values.profile, 'summary.txt'), `${lines.join('\n')}\n`);
  writeFileSync(join(values.profile, 'profile.json'), JSON.stringify({ wall, results, samples }, null, 1));
  if (cgroupRoot) {
    // The groups of files whose processes outlived them, once those are gone too, then the root.
    // A PostgreSQL file's guardian stops its server and removes its folder after the file's
    // process ends (up to 10 s; see test/support/postgres.ts): waited for, up to 20 s in all, so
    // that only what a file really left behind is reported, and the root goes.
    const groups = readdirSync(cgroupRoot, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(cgroupRoot, e.name));
    const populated = (group: string) =>
      /^populated 1$/m.test(readFileSync(join(group, 'cgroup.events'), 'utf8'));
    for (let waits = 0; waits < 200 && groups.some(populated); waits++) await sleep(100);
    for (const group of groups) {
      try {
        rmdirSync(group);
      } catch {
        const left = readFileSync(join(group, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
        console.error(
          `run-suite: ${relative(cgroupRoot, group)} still holds processes its file left behind: ${left.join(' ')}`,
        );
      }
    }
    try {
      rmdirSync(cgroupRoot);
    } catch {
      console.error(`run-suite: could not remove ${cgroupRoot}`);
    }
  }
  console.log(lines.slice(0, 2).join('\n'));
}
process.exitCode = failed.length > 0 ? 1 : 0;
