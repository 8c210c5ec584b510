import { lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalContext } from './context.ts';
import { type JobRun, jobDir, type SavedJob, savedJob } from './job-run.ts';

/** Ended jobs whose state and logs are kept; older ones are removed. */
const ENDED_KEPT = 10_000;
/** What the ended jobs' state and logs may hold together by default (`local.retainedLogsBytes`). */
export const DEFAULT_RETAINED_LOGS_BYTES = 10 * 2 ** 30;

/**
 * Makes a job's folder, passable by others (its hosts file is bound by path as the containers'
 * host users), and its logs folder, ucompute's alone. Synchronous: a folder that exists costs one
 * call of the kernel's, where node:fs/promises costs a round trip through libuv's thread pool (two
 * thread wake-ups) per call, many times that on a busy machine (bench/local.bench.ts).
 */
export async function makeJobDir(ctx: LocalContext, id: string): Promise<void> {
  mkdirSync(jobDir(ctx.jobsDir, id), { recursive: true, mode: 0o711 });
  mkdirSync(join(jobDir(ctx.jobsDir, id), 'logs'), { recursive: true, mode: 0o700 });
}

/**
 * What each unfinished job's state file holds, or is being written with: a step that changed
 * nothing saved writes nothing, and writes of one job go one after the other (one .tmp file).
 * Forgotten when the job ends (keepEnded) or its folder goes, so that a later save writes.
 */
const written = new WeakMap<JobRun, { text: string; done: Promise<void> }>();

/** Writes the job's state (every change passes here, so phase changes are told from here too). */
export function saveRun(ctx: LocalContext, run: JobRun): Promise<void> {
  ctx.reports.tellPhase(run);
  const text = JSON.stringify(savedJob(run));
  const last = written.get(run);
  if (last?.text === text) return last.done;
  const file = join(jobDir(ctx.jobsDir, run.id), 'state.json');
  const done = (async () => {
    await last?.done.catch(() => undefined);
    // A new file, written at once (as the job's folders are made), then put in place by a rename
    // (never half-written) in the thread pool: replacing a file makes ext4 start writing it out,
    // which may wait on a busy disk.
    writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
    await rename(`${file}.tmp`, file);
  })();
  const entry = { text, done };
  written.set(run, entry);
  // A failed write is written again by the next save.
  done.catch(() => {
    if (written.get(run) === entry) written.delete(run);
  });
  return done;
}

/** The jobs an earlier run of ucompute saved; a job that never got past its first write is removed. */
export async function savedJobs(ctx: LocalContext): Promise<SavedJob[]> {
  const found: SavedJob[] = [];
  for (const id of await readdir(ctx.jobsDir)) {
    try {
      found.push(JSON.parse(await readFile(join(jobDir(ctx.jobsDir, id), 'state.json'), 'utf8')) as SavedJob);
    } catch {
      await removeJobDir(ctx, id);
    }
  }
  return found;
}

export function removeJobDir(ctx: LocalContext, id: string): Promise<void> {
  const run = ctx.runs.get(id);
  if (run) written.delete(run);
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
