import { lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalContext } from './context.ts';
import { type JobRun, jobDir, type SavedJob, savedJob } from './job-run.ts';

/** Ended jobs whose state and logs are kept; older ones are removed. */
const ENDED_KEPT = 10_000;
/** What the ended jobs' state and logs may hold together by default (`local.retainedLogsBytes`). */
export const DEFAULT_RETAINED_LOGS_BYTES = 10 * 2 ** 30;

/**
 * Makes a job's folder, passable by others (an older ucompute's pods bind its hosts file by path
 * as the containers' host users), and its logs folder, ucompute's alone. Synchronous: a folder that exists costs one
 * call of the kernel's, where node:fs/promises costs a round trip through libuv's thread pool (two
 * thread wake-ups) per call, many times that on a busy machine (bench/local.bench.ts).
 */
export async function makeJobDir(ctx: LocalContext, id: string): Promise<void> {
  mkdirSync(jobDir(ctx.jobsDir, id), { recursive: true, mode: 0o711 });
  mkdirSync(join(jobDir(ctx.jobsDir, id), 'logs'), { recursive: true, mode: 0o700 });
}

/**
 * A job's state alternates between two files, each rewritten in place with its save's number on
 * the first line: a save that a crash cuts short leaves the other file, one save older, whole,
 * and the reader takes the whole one with the higher number. Neither is ever replaced: a rename
 * (the file written aside, then put in place) freed an inode at every save, and on ext4 without a
 * journal every inode allocated afterwards skips, one by one, each inode freed in the last minutes
 * (`recently_deleted`): with three saves a job, a burst of jobs spent over a third of ucompute's
 * own CPU there (perf, bench/local.bench.ts). `state.json` is an older ucompute's single file.
 */
const SLOTS = ['state.0.json', 'state.1.json'] as const;
const LEGACY = 'state.json';

/**
 * What each unfinished job's state file holds, or is being written with: a step that changed
 * nothing saved writes nothing, and writes of one job go one after the other. Forgotten when the
 * job ends (keepEnded) or its folder goes, so that a later save writes.
 */
const written = new WeakMap<JobRun, { text: string; done: Promise<void> }>();
/** The number of each job's last save (from its files after a restart), while its folder exists. */
const saves = new Map<string, number>();

/** Writes the job's state (every change passes here, so phase changes are told from here too). */
export function saveRun(ctx: LocalContext, run: JobRun): Promise<void> {
  ctx.reports.tellPhase(run);
  const text = JSON.stringify(savedJob(run));
  const last = written.get(run);
  if (last?.text === text) return last.done;
  const done = (async () => {
    await last?.done.catch(() => undefined);
    const number = (saves.get(run.id) ?? 0) + 1;
    // In place and at once (as the job's folders are made): the same inode every other save.
    writeFileSync(join(jobDir(ctx.jobsDir, run.id), SLOTS[number % 2]!), `${number}\n${text}`, {
      mode: 0o600,
    });
    saves.set(run.id, number);
  })();
  const entry = { text, done };
  written.set(run, entry);
  // A failed write is written again by the next save.
  done.catch(() => {
    if (written.get(run) === entry) written.delete(run);
  });
  return done;
}

/** The newest whole save in a job's folder (an older ucompute's single file counts as save 0). */
async function readSaved(dir: string): Promise<{ number: number; job: SavedJob } | null> {
  let found: { number: number; job: SavedJob } | null = null;
  for (const slot of SLOTS) {
    try {
      const text = await readFile(join(dir, slot), 'utf8');
      const newline = text.indexOf('\n');
      const number = Number(text.slice(0, newline));
      if (newline < 0 || !Number.isSafeInteger(number)) continue;
      const job = JSON.parse(text.slice(newline + 1)) as SavedJob;
      if (!found || number > found.number) found = { number, job };
    } catch {
      // Missing, or cut short by a crash: the other one holds the save before.
    }
  }
  if (found) return found;
  try {
    return { number: 0, job: JSON.parse(await readFile(join(dir, LEGACY), 'utf8')) as SavedJob };
  } catch {
    return null;
  }
}

/** The jobs an earlier run of ucompute saved; a job that never got past its first write is removed. */
export async function savedJobs(ctx: LocalContext): Promise<SavedJob[]> {
  const found: SavedJob[] = [];
  for (const id of await readdir(ctx.jobsDir)) {
    const saved = await readSaved(jobDir(ctx.jobsDir, id));
    if (saved) {
      saves.set(id, saved.number);
      found.push(saved.job);
    } else await removeJobDir(ctx, id);
  }
  return found;
}

export function removeJobDir(ctx: LocalContext, id: string): Promise<void> {
  const run = ctx.runs.get(id);
  if (run) written.delete(run);
  saves.delete(id);
  return rm(jobDir(ctx.jobsDir, id), { recursive: true, force: true });
}

/**
 * Counts the job among the ended ones with the bytes its folder keeps, forgetting the oldest past
 * ENDED_KEPT jobs or past `ctx.retained.limitBytes` together (the newest is always kept).
 */
export async function keepEnded(ctx: LocalContext, id: string): Promise<void> {
  const { retained } = ctx;
  const run = ctx.runs.get(id);
  if (run) written.delete(run);
  ctx.endedOrder.push(id);
  retained.bytes.set(id, folderBytes(jobDir(ctx.jobsDir, id)));
  let total = 0;
  for (const bytes of retained.bytes.values()) total += bytes;
  while (ctx.endedOrder.length > 1 && (ctx.endedOrder.length > ENDED_KEPT || total > retained.limitBytes)) {
    const oldest = ctx.endedOrder.shift()!;
    total -= retained.bytes.get(oldest) ?? 0;
    retained.bytes.delete(oldest);
    ctx.runs.delete(oldest);
    await removeJobDir(ctx, oldest);
    ctx.log?.info({ jobId: oldest }, 'removed the oldest ended job’s state and logs (retention)');
  }
}

/** The bytes of the files below `path` (a job's folder: its state and logs), links not followed. */
function folderBytes(path: string, depth = 0): number {
  let s: ReturnType<typeof lstatSync>;
  try {
    s = lstatSync(path);
  } catch {
    return 0;
  }
  if (!s.isDirectory()) return s.isFile() ? s.size : 0;
  // A job's folder is <id>/logs/<files>: deeper is not ours to count.
  if (depth > 3) return 0;
  let names: string[] = [];
  try {
    names = readdirSync(path);
  } catch {
    // Removed meanwhile: nothing to count.
  }
  let bytes = 0;
  for (const name of names) bytes += folderBytes(join(path, name), depth + 1);
  return bytes;
}

/** Forgets a job entirely: its run, and its state and logs. */
export async function forgetJob(ctx: LocalContext, id: string): Promise<void> {
  ctx.runs.delete(id);
  const kept = ctx.endedOrder.indexOf(id);
  if (kept >= 0) ctx.endedOrder.splice(kept, 1);
  ctx.retained.bytes.delete(id);
  await removeJobDir(ctx, id);
}
