import type { JobSpecification, JobState, JobUpdate } from '../model/job.ts';
import type { Outcome, OutcomeKind } from '../model/outcome.ts';
import type { Owner } from '../model/owner.ts';

// Jobs, their updates and idempotent submissions: what the job service keeps of every job.

export interface JobRecord {
  id: string;
  createdBy: string;
  project: string | null;
  state: JobState;
  application: string;
  createdAt: number;
  specification: JobSpecification;
  timeAllocationMs: number | null;
  startedAt: number | null;
  expiresAt: number | null;
  outputFolder: string | null;
  exitCodes: Record<string, number> | null;
  submitted: boolean;
  pricePerUnit: number;
  creditsCharged: number;
  chargedPeriods: number;
  /** When the current run started; null while none is under way (queued, suspended). */
  runStartedAt: number | null;
  /** How long the job's runs before the current one ran, in all. */
  timeRunBeforeMs: number;
  /**
   * The annotations of its build as submitted (what plugins read of a job at its start and end);
   * null while no build is saved (not built yet, or ended). The build itself is read only to hand it
   * to the backend again (`builds`): reading it with every job was most of what a read sent back.
   */
  annotations: Readonly<Record<string, string>> | null;
  updateCount: number;
  /**
   * How the job ended; while it is active, how ucompute is ending it (a cancel, its owner's
   * credits, its expiry), so that its end is that one whatever the backend says meanwhile.
   */
  outcome: Outcome | null;
}

/**
 * A job's row without its JSON (specification, build, exit codes) and its output folder: what a
 * pass over the running jobs reads of each, every time (thousands a second), so that it allocates
 * little and parses nothing.
 */
export type RunningJob = Omit<JobRecord, 'specification' | 'annotations' | 'exitCodes' | 'outputFolder'>;

/** What a charge reads of its job: not the whole row (a charge a minute for each running job). */
export interface ChargedSoFar {
  state: JobState;
  chargedPeriods: number;
  creditsCharged: number;
}

/** What submission reads of a job again just before the backend gets it. */
export interface SubmissionState {
  state: JobState;
  submitted: boolean;
}

/** A job's build as it is saved: its JSON, and its Volcano Job's annotations kept apart. */
export interface SavedBuild {
  json: string;
  annotations: Readonly<Record<string, string>>;
}

/** Column changes that go with an update, applied in the same transaction. */
export interface JobChanges {
  state?: JobState;
  startedAt?: number | null;
  runStartedAt?: number | null;
  timeRunBeforeMs?: number;
  expiresAt?: number | null;
  timeAllocationMs?: number | null;
  outputFolder?: string;
  exitCodes?: Record<string, number>;
  submitted?: boolean;
  /** The JobBuild as submitted; null once the job has ended. */
  build?: SavedBuild | null;
  outcome?: Outcome;
}

export interface NewJob {
  id: string;
  createdBy: string;
  project: string | null;
  application: string;
  createdAt: number;
  specification: JobSpecification;
  timeAllocationMs: number | null;
  pricePerUnit: number;
  /** What it holds back of its owner's credits until its next charge (credit-check.ts); 0 if absent. */
  reservedCredits?: number;
  firstUpdate: JobUpdate;
}

export interface JobVisibility {
  username: string;
  /** Projects whose every job the user sees (PI, ADMIN). */
  allOf: readonly string[];
  /** Projects where the user sees only their own jobs (USER). */
  ownOf: readonly string[];
}

export interface BrowseQuery {
  visibility: JobVisibility | 'all';
  state?: JobState;
  /** Final jobs that ended this way. */
  outcome?: OutcomeKind;
  application?: string;
  createdBy?: string;
  /** Epoch ms, inclusive. */
  createdAfter?: number;
  /** Epoch ms, exclusive. */
  createdBefore?: number;
  productId?: string;
  productCategory?: string;
  project?: string;
  ids?: readonly string[];
  /** Case-insensitive text in the job's id, name or application name. */
  query?: string;
  /** Oldest first; newest first by default. */
  ascending?: boolean;
  /** Ids sort by creation time; the page starts after this id, in the page's order. */
  before?: string;
  limit: number;
}

/** An update to append to a job as it stood before it (its update count is the update's number). */
export interface UpdateWrite {
  job: JobRecord;
  update: JobUpdate;
  changes: JobChanges;
}

/** What an Idempotency-Key stands for: the request's hash and the jobs it made. */
export interface IdempotentRequest {
  requestHash: string;
  jobIds: string[];
}

export interface JobStore {
  /** Inserts jobs with their first updates (one statement on PostgreSQL, whatever their number). */
  insert(jobs: readonly NewJob[]): Promise<void>;
  state(id: string): Promise<JobState | undefined>;
  /** The job; inside a transaction on PostgreSQL its row stays locked until the end. */
  get(id: string): Promise<JobRecord | undefined>;
  /**
   * The jobs of `ids` that exist, by id, read at once (one statement on PostgreSQL); inside a
   * transaction their rows stay locked until the end, taken in the order of their ids.
   */
  getMany(ids: readonly string[]): Promise<Map<string, JobRecord>>;
  updatesOf(id: string): Promise<JobUpdate[]>;
  /** The saved builds (JobBuild JSON) of those of `ids` that have one, by id (one statement on PostgreSQL). */
  builds(ids: readonly string[]): Promise<Map<string, string>>;
  /** Appends an update and applies its column changes; call inside a transaction with the check. */
  appendUpdate(job: JobRecord, update: JobUpdate, changes: JobChanges): Promise<void>;
  /**
   * Appends the updates of several jobs and applies their column changes, as `appendUpdate` each
   * in turn, in one statement on PostgreSQL whatever their number (a leader writes a batch of
   * jobs at once). Several updates of one job come in order, each on the job as the one before
   * left it.
   */
  appendUpdates(writes: readonly UpdateWrite[]): Promise<void>;
  /**
   * Records how ucompute is ending an active job, unless something is ending it already; answers
   * whether this one was recorded.
   */
  markEnding(id: string, outcome: Outcome): Promise<boolean>;
  /** Forgets how an active job was being ended (the backend could not stop it). */
  unmarkEnding(id: string): Promise<void>;
  /**
   * The jobs' states and what each was charged so far (a batch of charges' read), by id, of those
   * that exist (one statement on PostgreSQL); inside a transaction on PostgreSQL their rows stay
   * locked until the end, taken in the order of their ids, as with `getMany`.
   */
  chargedSoFar(ids: readonly string[]): Promise<Map<string, ChargedSoFar>>;
  /**
   * What the owner's active jobs hold back in a category (their reservations): kept as the changes
   * of that sum (held_credits, written by the jobs table's triggers when a job holding credits is
   * accepted or ends), so that reading it reads a handful of rows, not one per active job.
   */
  heldCredits(owner: Owner, category: string): Promise<number>;
  /**
   * The same sum, its changes folded into one row first when they are more than
   * HELD_CHANGES_KEPT; call in a transaction that holds the owner's allocations locked (a charge,
   * an intake): those are the ones that fold, one at a time per owner.
   */
  foldHeldCredits(owner: Owner, category: string): Promise<number>;
  /** Gives a job another name (null: none); the rest of its specification stays. */
  rename(id: string, name: string | null): Promise<void>;
  /**
   * Marks jobs handed to the backend, unless suspended meanwhile (unsuspend submits them again);
   * answers the state of each that exists, read in the same statement (one for all on PostgreSQL).
   */
  markSubmitted(ids: readonly string[]): Promise<Map<string, JobState>>;
  /**
   * The jobs' states and whether each was handed to the backend, by id, of those that exist (one
   * statement on PostgreSQL): what submission reads just before it hands over jobs built before.
   */
  submissionStates(ids: readonly string[]): Promise<Map<string, SubmissionState>>;
  browse(q: BrowseQuery): Promise<JobRecord[]>;
  /** Jobs that have not ended, oldest first. */
  active(): Promise<JobRecord[]>;
  /** The same jobs as `active`, each without its JSON: what the quota watch reads every minute. */
  activeRows(): Promise<RunningJob[]>;
  /**
   * The ids of queued jobs never handed to the backend, oldest first, at most `limit`: what a leader
   * adopts (another replica accepted them, or the leader before it crashed before submitting them).
   * Ids only: submission reads each job as it takes it, and a backlog is adopted again every pass.
   */
  unsubmitted(limit: number): Promise<string[]>;
  /**
   * Running jobs only, from the partial index of active jobs (a queue backlog costs nothing here):
   * at most `limit` of them with ids after `after` (undefined: from the first), by id. Read page by
   * page, a pass over thousands never holds every job's build at once.
   */
  running(after: string | undefined, limit: number): Promise<JobRecord[]>;
  /** The same running jobs and pages as `running`, each without its JSON: what the periodic passes read. */
  runningRows(after: string | undefined, limit: number): Promise<RunningJob[]>;
  /**
   * The same running jobs and pages as `runningRows`, only those whose deadline is at or before
   * `by`: what the expiry warnings read.
   */
  expiringRows(by: number, after: string | undefined, limit: number): Promise<RunningJob[]>;
  /** The ids of the same running jobs and pages as `running`: what the resource sampler reads. */
  runningIds(after: string | undefined, limit: number): Promise<string[]>;
  /** Of these jobs, those running, each without its JSON (in no particular order). */
  runningRowsOf(ids: readonly string[]): Promise<RunningJob[]>;
  countByState(): Promise<Record<string, number>>;
  idempotent(username: string, key: string): Promise<IdempotentRequest | undefined>;
  rememberIdempotent(
    username: string,
    key: string,
    requestHash: string,
    jobIds: string[],
    now?: number,
  ): Promise<void>;
}
