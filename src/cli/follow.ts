import { setTimeout as sleep } from 'node:timers/promises';
import type { RawData } from 'ws';
import type { Job, JobStatus, JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { Client } from './client.ts';
import { CliError } from './errors.ts';
import { formatTime, formatUpdate, printJson } from './format.ts';
import { cliIo } from './io.ts';
import { commandExitCode, outcomeOf } from './outcome.ts';

/**
 * A final job's outcome: its state and how it ended, printed (unless JSON) as
 * `<id>: SUCCESS, completed (exit 1 on rank 0)`; answers the exit code of its outcome (see
 * `commandExitCode`). It goes to stdout, or to stderr when stdout carries the job's own output.
 */
export function finalOutcome(job: Job, o: { json: boolean; toStderr?: boolean }): number {
  if (!o.json) (o.toStderr ? cliIo().stderr : cliIo().stdout).write(`${job.id}: ${outcomeOf(job)}\n`);
  return commandExitCode(job);
}

/** How long past its deadline a job may still look alive before waiting gives up. */
const EXPIRY_GRACE_MS = 120_000;

/**
 * Polls the job until it reaches a final state. A job with a deadline bounds the wait (plus a
 * grace for the service's monitor); one without runs until it ends or the user interrupts.
 */
export async function waitForJob(client: Client, id: string): Promise<Job> {
  let delay = 100;
  for (;;) {
    const job = await client.get<Job>('/api/jobs/retrieve', { id });
    if (isFinal(job.status.state)) return job;
    if (job.status.expiresAt !== undefined && Date.now() > job.status.expiresAt + EXPIRY_GRACE_MS) {
      throw new CliError(
        `job ${id} passed its deadline (${formatTime(job.status.expiresAt)}) but is still ${job.status.state}`,
        1,
      );
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 2000);
  }
}

interface FollowMessage {
  updates?: JobUpdate[];
  log?: { rank: number; stdout?: string; stderr?: string }[];
  newStatus?: JobStatus;
}

/** Writes log chunks, prefixing whole lines with `[rank] ` when there are several ranks. */
function logWriter(prefixed: boolean) {
  const partial = new Map<string, string>();
  const write = (rank: number, stream: 'stdout' | 'stderr', text: string) => {
    const out = stream === 'stdout' ? cliIo().stdout : cliIo().stderr;
    if (!prefixed) {
      out.write(text);
      return;
    }
    const key = `${rank}:${stream}`;
    const lines = ((partial.get(key) ?? '') + text).split('\n');
    partial.set(key, lines.pop()!);
    for (const line of lines) out.write(`[${rank}] ${line}\n`);
  };
  const flush = () => {
    for (const [key, rest] of partial) {
      if (!rest) continue;
      const [rank, stream] = key.split(':') as [string, 'stdout' | 'stderr'];
      (stream === 'stdout' ? cliIo().stdout : cliIo().stderr).write(`[${rank}] ${rest}\n`);
    }
    partial.clear();
  };
  return { write, flush };
}

/** Without -f, a running job's stream is read until it has been quiet this long (or at most MAX). */
const SNAPSHOT_QUIET_MS = 300;
/** The close code of a follow whose job's logs are gone (server/follow.ts). */
const LOGS_GONE = 4410;
const SNAPSHOT_MAX_MS = 5000;

/**
 * Reads the job's follow stream: log chunks to stdout/stderr, updates (unless `quiet`) to stderr.
 * With `follow`, until the service closes the stream at the job's end; without, only what is
 * there now. Returns the job as it stands afterwards.
 */
export async function followJob(
  client: Client,
  id: string,
  o: { json: boolean; follow: boolean; showUpdates?: boolean; rank?: number },
): Promise<Job> {
  // Retrieve first: a clear 404 for unknown jobs, and the replica count for prefixes.
  const before = await client.get<Job>('/api/jobs/retrieve', { id });
  const replicas = before.specification.replicas ?? 1;
  if (o.rank !== undefined && o.rank >= replicas) {
    throw new CliError(
      `--rank: job ${id} has ${replicas === 1 ? 'only rank 0' : `ranks 0 to ${replicas - 1}`}`,
    );
  }
  const writer = logWriter(o.rank === undefined && replicas > 1);
  const showUpdates = o.showUpdates ?? o.follow;
  const { ws, opened } = client.socket('/api/jobs/follow', { id });
  let lastState = before.status.state;
  const snapshotting = !o.follow && !isFinal(before.status.state);
  let quiet: NodeJS.Timeout | undefined;
  let limit: NodeJS.Timeout | undefined;
  const stopSoon = () => {
    clearTimeout(quiet);
    quiet = setTimeout(() => ws.close(1000, 'done'), SNAPSHOT_QUIET_MS);
  };

  // Every listener is attached before the upgrade completes: messages may arrive with it.
  ws.on('message', (data: RawData) => {
    let message: FollowMessage;
    try {
      message = JSON.parse(data.toString()) as FollowMessage;
    } catch {
      return;
    }
    if (o.rank !== undefined && message.log) {
      message = { ...message, log: message.log.filter((chunk) => chunk.rank === o.rank) };
    }
    if (o.json) printJson(message, true);
    if (!o.json && showUpdates) {
      for (const u of message.updates ?? [])
        cliIo().stderr.write(`${formatTime(u.timestamp)} ${formatUpdate(u)}\n`);
    }
    if (message.newStatus) lastState = message.newStatus.state;
    if (!o.json) {
      for (const chunk of message.log ?? []) {
        if (chunk.stdout) writer.write(chunk.rank, 'stdout', chunk.stdout);
        if (chunk.stderr) writer.write(chunk.rank, 'stderr', chunk.stderr);
      }
    }
    if (snapshotting) stopSoon();
  });
  const done = new Promise<{ code: number; reason: string }>((resolve, reject) => {
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.once('error', (e) =>
      reject(new CliError(`lost the connection to ucompute while following job ${id}: ${e.message}`, 1)),
    );
  }).finally(() => {
    clearTimeout(quiet);
    clearTimeout(limit);
  });
  // A refused upgrade also ends `done`; `opened` reports that one.
  done.catch(() => {});
  await opened;
  if (snapshotting) {
    stopSoon();
    limit = setTimeout(() => ws.close(1000, 'done'), SNAPSHOT_MAX_MS);
  }
  const closed = await done;
  writer.flush();
  // The job ran, but its logs were removed: said, rather than printing nothing.
  if (closed.code === LOGS_GONE) cliIo().stderr.write(`job ${id}: ${closed.reason}\n`);
  if (o.follow && !isFinal(lastState) && closed.code !== 1000) {
    throw new CliError(
      `lost the connection to ucompute while following job ${id}` +
        ` (${closed.code}${closed.reason ? `: ${closed.reason}` : ''})`,
      1,
    );
  }
  return client.get<Job>('/api/jobs/retrieve', { id });
}
