import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalContext } from './context.ts';
import { type JobRun, jobDir, type SavedJob, savedJob } from './job-run.ts';

/** Ended jobs whose state and logs are kept; older ones are removed. */
const ENDED_KEPT = 10_000;

/**
 * Makes a job's folder, passable by others (its hosts file is bound by path as the containers'
 * host users), and its logs folder, ucompute's alone.
 */
export async function makeJobDir(ctx: LocalContext, id: string): Promise<void> {
  await mkdir(jobDir(ctx.jobsDir, id), { recursive: true, mode: 0o711 });
  await mkdir(join(jobDir(ctx.jobsDir, id), 'logs'), { recursive: true, mode: 0o700 });
}

/** Writes the job's state (every change passes here, so phase changes are told from here too). */
export async function saveRun(ctx: LocalContext, run: JobRun): Promise<void> {
  ctx.reports.tellPhase(run);
  const file = join(jobDir(ctx.jobsDir, run.id), 'state.json');
  await writeFile(`${file}.tmp`, JSON.stringify(savedJob(run)), { mode: 0o600 });
  await rename(`${file}.tmp`, file);
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

export const removeJobDir = (ctx: LocalContext, id: string) =>
  rm(jobDir(ctx.jobsDir, id), { recursive: true, force: true });

/** Counts the job among the ended ones, forgetting the oldest past what is kept. */
export async function keepEnded(ctx: LocalContext, id: string): Promise<void> {
  ctx.endedOrder.push(id);
  while (ctx.endedOrder.length > ENDED_KEPT) {
    const oldest = ctx.endedOrder.shift()!;
    ctx.runs.delete(oldest);
    await removeJobDir(ctx, oldest);
  }
}

/** Forgets a job entirely: its run, and its state and logs. */
export async function forgetJob(ctx: LocalContext, id: string): Promise<void> {
  ctx.runs.delete(id);
  const kept = ctx.endedOrder.indexOf(id);
  if (kept >= 0) ctx.endedOrder.splice(kept, 1);
  await removeJobDir(ctx, id);
}
