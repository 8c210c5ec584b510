import type { JobSpecification, JobState, JobUpdate } from '../model/job.ts';
import type { Outcome, OutcomeKind } from '../model/outcome.ts';
import type { AllocationRecord } from './accounting.ts';
import type { TokenMetadata } from './directory.ts';
import { TOKEN_ID_LENGTH } from './directory.ts';
import type { JobEventRow } from './job-events.ts';
import type { ChargedSoFar, JobChanges, JobRecord, RunningJob } from './jobs.ts';
import type { Lease } from './leases.ts';
import type { SessionRecord } from './sessions.ts';
import type { SshKeyRecord } from './ssh-keys.ts';
import type { UserRecord } from './users.ts';

// Rows as both databases answer them (column names as in the migrations), made records. Numbers
// may come as numbers or, from PostgreSQL's bigint, as parsed numbers too; flags are 0 or 1.

export type Row = Record<string, unknown>;

export const toAllocation = (r: Row): AllocationRecord => ({
  id: Number(r.id),
  owner: r.owner as string,
  category: r.category as string,
  credits: Number(r.credits),
  used: Number(r.used),
  startAt: Number(r.start_at),
  endAt: Number(r.end_at),
});

/** An event, read with its update's body (null: a rename). */
export const toJobEvent = (r: Row): JobEventRow => ({
  seq: Number(r.seq),
  jobId: r.job_id as string,
  update: r.body === null || r.body === undefined ? null : (JSON.parse(r.body as string) as JobUpdate),
});

export const toToken = (r: Row): TokenMetadata => ({
  id: (r.hash as string).slice(0, TOKEN_ID_LENGTH),
  username: r.username as string,
  description: r.description as string,
  createdAt: Number(r.created_at),
});

/** The columns `toRunningJob` reads: a job's row without its JSON and its output folder. */
const RUNNING_JOB_COLUMNS = `id, created_by, project, state, application, created_at, time_allocation_ms,
  started_at, expires_at, submitted, price_per_unit, credits_charged, charged_periods, run_started_at,
  time_run_before_ms, update_count, outcome, outcome_by, outcome_reason`;

/** The columns `toJob` reads: a job's row without its build (JobStore.builds reads that). */
export const JOB_COLUMNS = `${RUNNING_JOB_COLUMNS}, specification, output_folder, exit_codes, annotations`;

/**
 * Running jobs (both stores), by id, at most `?` of them with ids after `?`: what `toJob` reads, or only
 * those `toRunningJob` reads. The partial index jobs_running holds exactly these rows.
 */
export const runningPage = (columns: 'job' | 'running-job' | 'id') =>
  `select ${columns === 'job' ? JOB_COLUMNS : columns === 'id' ? 'id' : RUNNING_JOB_COLUMNS} from jobs
   where state = 'RUNNING' and id > ? order by id limit ?`;

/** Running jobs (both stores) whose deadline is at or before `?`, then as `runningPage`. */
export const expiringPage = `select ${RUNNING_JOB_COLUMNS} from jobs
   where state = 'RUNNING' and expires_at <= ? and id > ? order by id limit ?`;

/** Jobs that have not ended (both stores), oldest first: what `toJob` or `toRunningJob` reads. */
export const activeJobs = (columns: 'job' | 'running-job') =>
  `select ${columns === 'job' ? JOB_COLUMNS : RUNNING_JOB_COLUMNS} from jobs
   where state not in ('SUCCESS', 'FAILURE', 'EXPIRED') order by id`;

/** The running jobs among some (the ids as `?`: an array on PostgreSQL, a JSON array on SQLite). */
export const runningOf = (ids: 'postgres' | 'sqlite') =>
  `select ${RUNNING_JOB_COLUMNS} from jobs where state = 'RUNNING' and id in
   ${ids === 'postgres' ? '(select unnest(?::text[]))' : '(select value from json_each(?))'}`;

export const toRunningJob = (r: Row): RunningJob => ({
  id: r.id as string,
  createdBy: r.created_by as string,
  project: (r.project as string | null) ?? null,
  state: r.state as JobState,
  application: r.application as string,
  createdAt: Number(r.created_at),
  timeAllocationMs: r.time_allocation_ms === null ? null : Number(r.time_allocation_ms),
  startedAt: r.started_at === null ? null : Number(r.started_at),
  expiresAt: r.expires_at === null ? null : Number(r.expires_at),
  submitted: r.submitted === 1,
  pricePerUnit: Number(r.price_per_unit),
  creditsCharged: Number(r.credits_charged),
  chargedPeriods: Number(r.charged_periods),
  runStartedAt: r.run_started_at === null ? null : Number(r.run_started_at),
  timeRunBeforeMs: Number(r.time_run_before_ms),
  updateCount: Number(r.update_count),
  outcome: r.outcome === null || r.outcome === undefined ? null : outcomeOf(r),
});

export const toJob = (r: Row): JobRecord => ({
  ...toRunningJob(r),
  specification: JSON.parse(r.specification as string) as JobSpecification,
  outputFolder: (r.output_folder as string | null) ?? null,
  exitCodes: r.exit_codes === null ? null : (JSON.parse(r.exit_codes as string) as Record<string, number>),
  annotations:
    r.annotations === null || r.annotations === undefined
      ? null
      : Object.freeze(JSON.parse(r.annotations as string) as Record<string, string>),
});

function outcomeOf(r: Row): Outcome {
  return {
    kind: r.outcome as OutcomeKind,
    ...(r.outcome_by !== null ? { by: r.outcome_by as string } : {}),
    ...(r.outcome_reason !== null ? { reason: r.outcome_reason as string } : {}),
  };
}

export const toSession = (r: Row): SessionRecord => ({
  hash: r.hash as string,
  kind: r.kind as SessionRecord['kind'],
  jobId: r.job_id as string,
  rank: Number(r.rank),
  username: r.username as string,
  createdAt: Number(r.created_at),
  lastUsedAt: Number(r.last_used_at),
  expiresAt: Number(r.expires_at),
});

export const toKey = (r: Row): SshKeyRecord => ({
  id: r.id as string,
  owner: r.owner as string,
  title: r.title as string,
  key: r.key as string,
  fingerprint: r.fingerprint as string,
  createdAt: Number(r.created_at),
});

export const toUser = (r: Row): UserRecord => ({
  name: r.name as string,
  admin: r.admin === 1,
  createdAt: Number(r.created_at),
  disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
});

export const toLease = (r: Row): Lease => ({
  name: r.name as string,
  holder: r.holder as string,
  epoch: Number(r.epoch),
  expiresAt: Number(r.expires_at),
});

/** What a charge reads of its job (both stores): its state and what it was charged so far. */
export const chargedSoFarWhere = (where: string) =>
  `select id, state, charged_periods, credits_charged from jobs where ${where}`;

export const toChargedSoFar = (r: Row): ChargedSoFar => ({
  state: r.state as JobState,
  chargedPeriods: Number(r.charged_periods),
  creditsCharged: Number(r.credits_charged),
});

/**
 * What an owner's active jobs hold back in a category: the sum of its rows in held_credits (one
 * row per change: a job accepted, a job ended, since the last fold), rounded to a millionth of a
 * credit so that the sums of opposite changes (a job's reservation on, then off) come to 0 exactly.
 */
export const HELD_CREDITS =
  'select count(*) as changes, coalesce(sum(credits), 0) as credits from held_credits where account = ? and category = ?';
export const heldSum = (r: Row | undefined) => Math.round(Number(r?.credits ?? 0) * 1e6) / 1e6;
/** An owner's rows in held_credits are folded into one (foldHeldCredits) beyond this many. */
export const HELD_CHANGES_KEPT = 16;

/**
 * JobEventLog.created (both stores): the jobs created by the events numbered in (?, ?], from the
 * events alone (a range of their key): joined with jobs to leave out those submitted since, it was
 * planned (generic plan) as a scan of every job, ~1,500 blocks a read.
 */
export const CREATED =
  'select job_id from job_events where seq > ? and seq <= ? and update_seq = 0 order by seq';

/** Marks jobs submitted unless suspended, answering their states: `where` names them. */
export const markSubmittedWhere = (where: string) =>
  `update jobs set submitted = case when state = 'SUSPENDED' then submitted else 1 end where ${where} returning id, state`;

/** A job's changes as its columns' new values (both stores). */
export function jobChangeColumns(changes: JobChanges): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  if (changes.state !== undefined) out.state = changes.state;
  if (changes.startedAt !== undefined) out.started_at = changes.startedAt;
  if (changes.runStartedAt !== undefined) out.run_started_at = changes.runStartedAt;
  if (changes.timeRunBeforeMs !== undefined) out.time_run_before_ms = changes.timeRunBeforeMs;
  if (changes.expiresAt !== undefined) out.expires_at = changes.expiresAt;
  if (changes.timeAllocationMs !== undefined) out.time_allocation_ms = changes.timeAllocationMs;
  if (changes.outputFolder !== undefined) out.output_folder = changes.outputFolder;
  if (changes.exitCodes !== undefined) out.exit_codes = JSON.stringify(changes.exitCodes);
  if (changes.submitted !== undefined) out.submitted = changes.submitted ? 1 : 0;
  if (changes.build !== undefined) {
    out.build = changes.build?.json ?? null;
    out.annotations = changes.build ? JSON.stringify(changes.build.annotations) : null;
  }
  if (changes.outcome !== undefined) {
    out.outcome = changes.outcome.kind;
    out.outcome_by = changes.outcome.by ?? null;
    out.outcome_reason = changes.outcome.reason ?? null;
  }
  return out;
}

/** The columns a job's changes may set, with their PostgreSQL types. */
export const JOB_CHANGE_COLUMNS: Readonly<Record<string, 'text' | 'bigint'>> = {
  state: 'text',
  started_at: 'bigint',
  run_started_at: 'bigint',
  time_run_before_ms: 'bigint',
  expires_at: 'bigint',
  time_allocation_ms: 'bigint',
  output_folder: 'text',
  exit_codes: 'text',
  submitted: 'bigint',
  build: 'text',
  annotations: 'text',
  outcome: 'text',
  outcome_by: 'text',
  outcome_reason: 'text',
};

/**
 * The `update jobs set …` of a job's changes, as the same SQL for both stores: one assignment
 * (`column = ?`) per change, with its value. The update count always goes up by one.
 */
export function jobChangeAssignments(changes: JobChanges): {
  sets: string[];
  values: (string | number | null)[];
} {
  const columns = Object.entries(jobChangeColumns(changes));
  return {
    sets: ['update_count = update_count + 1', ...columns.map(([column]) => `${column} = ?`)],
    values: columns.map(([, value]) => value),
  };
}
