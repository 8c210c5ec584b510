/**
 * CPU time of a command and of every process it starts, by program (issue 18: where a job's CPU
 * goes). The command runs in a cgroup v2 group of its own, which every descendant inherits
 * (detached supervisors included; the local backend's pods join cgroup v1 hierarchies only), and
 * `perf record` takes three scheduler tracepoints for that group alone: sched_stat_runtime (each
 * slice of CPU a task was charged, in ns: exact, not sampled), sched_process_fork and
 * sched_process_exec. Each task is named by the program it runs: a process is named by its last
 * exec, a child forked and not yet exec'd by its parent's name with `› fork`, a thread by its
 * process's name and the thread's own name. Kernel threads (e.g. the worker that cleans a deleted
 * network namespace) are outside the group and not counted.
 *
 * Named beyond the file name: a Node process whose parent is Node (the local backend's launcher);
 * a Perl process one of whose descendants ran bubblewrap (a container's supervisor; the supervisors'
 * launcher when more than one of its children did, and its forks are then the supervisors), others
 * Perl (configure-netns.pl and the like).
 *
 * CPU is split at the first exec of bubblewrap: before it is the command's start (the runtime's
 * set-up), from it on the jobs. The group's own cpu.stat is printed beside the sum as a check.
 * Needs root, perf and a cgroup v2 mount.
 *
 *   node bench/cpu-by-program.ts [--per N] [--keep DIR] -- node bench/local.bench.ts --jobs 1000 --latency 0 --podman 0 --podman-jobs 0
 *
 * `--per N` prints each program's CPU per N (e.g. the jobs run) as well.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  options: { per: { type: 'string' }, keep: { type: 'string' } },
  allowPositionals: true,
});
if (positionals.length === 0) {
  console.error('usage: node bench/cpu-by-program.ts [--per N] [--keep DIR] -- COMMAND ...');
  process.exit(2);
}
const PER = values.per ? Number(values.per) : null;

const mountinfo = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
const v2 = mountinfo
  .map((l) => l.split(' - '))
  .find(([, right]) => right?.startsWith('cgroup2 '))?.[0]
  ?.split(' ')[4];
if (!v2) {
  console.error('cpu-by-program: no cgroup2 mount');
  process.exit(1);
}
const group = `ucompute-cpu-${process.pid}`;
const groupDir = join(v2, group);
mkdirSync(groupDir);
const dir = values.keep ?? mkdtempSync(join(tmpdir(), 'cpu-by-program-'));
mkdirSync(dir, { recursive: true });
const data = join(dir, 'perf.data');

const load0 = loadavg()[0]!;
const t0 = performance.now();
const events = ['sched:sched_stat_runtime', 'sched:sched_process_fork', 'sched:sched_process_exec'];
const record = spawnSync(
  'perf',
  [
    'record',
    '-q',
    '-o',
    data,
    '-a',
    '-m',
    '1024',
    ...events.flatMap((e) => ['-e', e, '-G', group]),
    '--',
    'sh',
    '-c',
    `echo $$ > ${join(groupDir, 'cgroup.procs')} && exec "$@"`,
    'sh',
    ...positionals,
  ],
  { stdio: 'inherit' },
);
const wall = (performance.now() - t0) / 1000;
const load1 = loadavg()[0]!;
const stat = Object.fromEntries(
  readFileSync(join(groupDir, 'cpu.stat'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => l.split(' ') as [string, string]),
);
// Every process of it ended with the command (a leftover would keep the group).
try {
  rmdirSync(groupDir);
} catch (error) {
  console.error(`cpu-by-program: ${groupDir} kept: ${(error as Error).message}`);
}

interface Task {
  /** The name its CPU goes to now. */
  name: string;
  /** Its process (thread group) id, once an event said it. */
  tgid: number | null;
  parent: number | null;
  /** Names it ran (execs), in order. */
  execs: string[];
}
const tasks = new Map<number, Task>();
const task = (tid: number): Task => {
  let t = tasks.get(tid);
  if (!t) {
    t = { name: '(before the trace)', tgid: null, parent: null, execs: [] };
    tasks.set(tid, t);
  }
  return t;
};
/** ns by (tid, name at the time, thread name, phase). */
const slices = new Map<string, number>();
let firstBwrap = Number.POSITIVE_INFINITY;
const script = spawn('perf', ['script', '-i', data, '-F', 'comm,pid,tid,time,event,trace'], {
  stdio: ['ignore', 'pipe', 'ignore'],
});
const LINE = /^\s*(.*?)\s+(\d+)\/(\d+)\s+([\d.]+):\s+(\S+):\s+(.*)$/;
for await (const line of createInterface({ input: script.stdout })) {
  const m = LINE.exec(line);
  if (!m) continue;
  const [, , pidText, tidText, timeText, event, trace] = m as unknown as string[];
  const headerPid = Number(pidText);
  const headerTid = Number(tidText);
  const time = Number(timeText);
  const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S+)`).exec(trace!)?.[1];
  if (event === 'sched:sched_process_fork') {
    const parent = task(Number(field('pid')));
    const child = task(Number(field('child_pid')));
    child.parent = Number(field('pid'));
    child.name = parent.name.endsWith('› fork') ? parent.name : `${parent.name} › fork`;
    child.execs = [...parent.execs];
  } else if (event === 'sched:sched_process_exec') {
    const t = task(headerTid);
    const file = basename(field('filename') ?? '?');
    t.execs.push(file);
    t.name = file;
    if (file === 'bwrap') firstBwrap = Math.min(firstBwrap, time);
  } else if (event === 'sched:sched_stat_runtime') {
    const tid = Number(field('pid'));
    const ns = Number(field('runtime'));
    const t = task(tid);
    if (tid === headerTid) t.tgid = headerPid;
    const comm = /comm=(.*?) pid=/.exec(trace!)?.[1] ?? '?';
    const key = `${tid}\t${t.name}\t${comm}\t${time < firstBwrap ? 'start' : 'jobs'}`;
    slices.set(key, (slices.get(key) ?? 0) + ns);
  }
}

/** Descendants that ran bubblewrap make a Perl process a supervisor. */
const ranBwrap = new Set<number>();
for (const [tid, t] of tasks) {
  if (!t.execs.includes('bwrap')) continue;
  for (let p: number | null = tid; p !== null && !ranBwrap.has(p); p = tasks.get(p)?.parent ?? null)
    ranBwrap.add(p);
}
/** How many children of each process ran bubblewrap below them: a supervisor has one per container. */
const bwrapChildren = new Map<number, number>();
for (const tid of ranBwrap) {
  const parent = tasks.get(tid)?.parent;
  if (parent !== null && parent !== undefined)
    bwrapChildren.set(parent, (bwrapChildren.get(parent) ?? 0) + 1);
}
/**
 * A Perl process's role: the supervisors' launcher (many children that ran bubblewrap), a
 * supervisor (it exec'd Perl, or the launcher forked it), another Perl (configure-netns.pl and the
 * like); a fork that did not exec is its parent's role with `› fork`.
 */
function perlRole(owner: number, name: string): string {
  const t = tasks.get(owner)!;
  if (!name.endsWith('› fork')) {
    if ((bwrapChildren.get(owner) ?? 0) > 1) return "perl (supervisors' launcher)";
    return ranBwrap.has(owner) ? 'perl (supervisor)' : 'perl (not a supervisor)';
  }
  const parent = t.parent === null ? null : (tasks.get(t.parent)?.tgid ?? t.parent);
  const role =
    parent === null || parent === owner ? 'perl (?)' : perlRole(parent, tasks.get(parent)?.name ?? '');
  return role === "perl (supervisors' launcher)"
    ? 'perl (supervisor, forked by the launcher)'
    : `${role} › fork`;
}
function label(tid: number, name: string, comm: string): string {
  const t = tasks.get(tid)!;
  const tgid = t.tgid ?? tid;
  const leader = tasks.get(tgid) ?? t;
  const thread = tgid !== tid;
  let base = thread ? leader.name : name;
  const owner = thread ? tgid : tid;
  if (base.startsWith('perl')) base = perlRole(owner, base);
  if (base.startsWith('node')) {
    const parent = tasks.get(owner)?.parent;
    const parentTgid = parent !== null && parent !== undefined ? (tasks.get(parent)?.tgid ?? parent) : null;
    const parentName = parentTgid !== null ? (tasks.get(parentTgid)?.name ?? '') : '';
    if (parentName.startsWith('node')) base = base.replace(/^node/, 'node (launcher)');
  }
  return thread ? `${base} [thread ${comm.replace(/\d+$/, 'N')}]` : base;
}

const byLabel = new Map<string, { start: number; jobs: number; tids: Set<number> }>();
for (const [key, ns] of slices) {
  const [tidText, name, comm, phase] = key.split('\t') as [string, string, string, string];
  const tid = Number(tidText);
  const l = label(tid, name, comm);
  const row = byLabel.get(l) ?? { start: 0, jobs: 0, tids: new Set() };
  if (phase === 'start') row.start += ns;
  else row.jobs += ns;
  row.tids.add(tid);
  byLabel.set(l, row);
}
const rows = [...byLabel].sort((a, b) => b[1].start + b[1].jobs - (a[1].start + a[1].jobs));
const sum = rows.reduce((s, [, r]) => s + r.start + r.jobs, 0);
const sumJobs = rows.reduce((s, [, r]) => s + r.jobs, 0);
const f = (ns: number, d = 2) => (ns / 1e9).toFixed(d);
const head = ['program', 'tasks', 'CPU s before 1st bwrap', 'CPU s from it', 'share of that'];
if (PER) head.push(`CPU ms per ${PER}`);
const table = rows.map(([l, r]) => {
  const cells = [l, String(r.tids.size), f(r.start), f(r.jobs), `${((100 * r.jobs) / sumJobs).toFixed(1)}%`];
  if (PER) cells.push((r.jobs / 1e6 / PER).toFixed(2));
  return cells;
});
const total = ['all', '', f(sum - sumJobs), f(sumJobs), '100%'];
if (PER) total.push((sumJobs / 1e6 / PER).toFixed(2));
table.push(total);
const widths = head.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
const out = (cells: string[]) =>
  `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
console.log(out(head));
console.log(`| ${widths.map((w, i) => (i === 0 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`);
for (const r of table) console.log(out(r));
console.log(
  `\n- the group's cpu.stat: usage ${(Number(stat.usage_usec) / 1e6).toFixed(2)} s (user ${(Number(stat.user_usec) / 1e6).toFixed(2)}, system ${(Number(stat.system_usec) / 1e6).toFixed(2)}); traced ${f(sum)} s; wall ${wall.toFixed(1)} s; load average ${load0.toFixed(1)} → ${load1.toFixed(1)}; perf exit ${record.status}`,
);
if (!values.keep) rmSync(dir, { recursive: true, force: true });
process.exit(record.status ?? 1);
