import type { Clock } from '../model/clock.ts';
import type { Job, JobUpdate } from '../model/job.ts';
import type { JobPlugin, PreparedJob } from '../plugins/plugin.ts';
import type { InputStorage, JobStorage } from '../storage/job-storage.ts';
import type { JobChanges } from '../store/jobs.ts';
import type { Store, Transactional } from '../store/store.ts';
import type { BrowseOptions, Caller, Usage, UsageQuery, Wallet } from './access.ts';
import type { Backend, LogChunk } from './backend.ts';
import type { ExtendItem, RenameItem } from './control.ts';
import type { CreateOptions, QuotaCheck } from './intake.ts';
import type { JobEventListener, Watch } from './job-events.ts';
import type { Logger } from './log.ts';
import type { JobMirror } from './mirror.ts';
import type { JobEnvironment } from './prepare.ts';
import type { IncludeFlags } from './presentation.ts';
import type { StateListener, UpdateListener } from './update-listeners.ts';

// The job service's contract: what it is built from and what callers (routes, CLI, provider) may
// ask of it. service.ts assembles it from its parts.

/** UCloud's PageV2. */
export interface JobPage {
  items: Job[];
  next: string | null;
  itemsPerPage: number;
}

/** UCloud's ComputeUtilization: what the backend offers, what running jobs use, and the queue. */
export interface Utilization {
  capacity: { cpu: number; memory: number };
  usedCapacity: { cpu: number; memory: number };
  queueStatus: { running: number; pending: number };
}

export interface ServiceOptions {
  store: Store;
  env: JobEnvironment;
  backend: Backend;
  plugins?: readonly JobPlugin[];
  storage?: JobStorage;
  /** Where jobs' input files and folders are checked at submit (400 when one is not there). */
  inputs?: InputStorage;
  /**
   * The owners' storage quotas: an owner at or over its quota cannot submit or unsuspend jobs
   * (402), and its jobs that have not started are held (quota-hold.ts).
   */
  quotas?: QuotaCheck;
  /** What the service reads the time from and waits on (monitoring, back-offs); the machine's by default. */
  clock?: Clock;
  log?: Logger;
  /** How often running jobs are monitored (expiry, charges). */
  monitorIntervalMs?: number;
  /** Refuse jobs of owners without credits (402). */
  requireCredits?: boolean;
  /** First wait before submitting again to a backend that refused; it doubles each time. */
  submitRetryMs?: number;
  /** Another system told of every update and charge as it is written (UCloud Core in provider mode). */
  mirror?: JobMirror;
  /**
   * Several replicas share the store: the backend loop runs only while `lead` makes this one the
   * leader. Otherwise this process is its own leader (the embedded default): `start` runs it.
   */
  replicated?: boolean;
}

/**
 * JobManagement as callers use it: accepts jobs, keeps them durable, drives them through their
 * lifecycle with the backend, runs every plugin hook in the list's order, and answers what
 * callers may see.
 */
export interface JobService {
  /** Checks the items whole, stores them durably, and answers their ids (once per Idempotency-Key). */
  create(caller: Caller, items: unknown, options?: CreateOptions): Promise<string[]>;
  /**
   * Stores durably, and submits, jobs validated elsewhere with ids given elsewhere (UCloud Core's);
   * a job whose id is already stored is left as it is. Answers the ids it stored.
   */
  admit(jobs: readonly PreparedJob[]): Promise<string[]>;
  /** Stops the active jobs of an account (`user:<name>`, `project:<id>`) in a product category. */
  stopJobsOf(account: string, category: string, status: string): Promise<void>;
  /** A page of the jobs the caller sees, as UCloud's browse and search answer it. */
  browse(caller: Caller, options?: BrowseOptions & IncludeFlags): Promise<JobPage>;
  /** The job, or 404 when the caller may not see it. */
  retrieve(caller: Caller, id: string, flags?: IncludeFlags): Promise<Job>;
  terminate(caller: Caller, ids: readonly string[]): Promise<void>;
  extend(caller: Caller, items: readonly ExtendItem[]): Promise<void>;
  /** Frees a queued or running job's resources, keeping the job and its folder (409 otherwise). */
  suspend(caller: Caller, ids: readonly string[]): Promise<void>;
  /** Queues suspended jobs again: the same jobs, folders and builds. */
  unsuspend(caller: Caller, ids: readonly string[]): Promise<void>;
  /** The leader's watches' writes, fenced as the backend loop's; refused while not leading. */
  leader: LeaderWrites;
  rename(caller: Caller, items: readonly RenameItem[]): Promise<void>;
  /** The utilization of the machines the job's product runs on (here: the backend's). */
  utilization(caller: Caller, jobId: string): Promise<Utilization>;
  /** Follows a job's updates from now on, with the job as it stands. */
  follow(
    caller: Caller,
    id: string,
    listener: UpdateListener,
  ): Promise<{ job: Job; unsubscribe: () => void }>;
  /** The job's logs; 404 (at the first chunk read) when the caller may not see the job. */
  logs(
    caller: Caller,
    id: string,
    options: { follow: boolean; signal?: AbortSignal },
  ): AsyncIterable<LogChunk>;
  /**
   * Watches the changes of every job the caller may see, from now on: with the id of the last
   * change a client saw, also those it missed since (or 'resync' when they are no longer known).
   */
  watchJobs(caller: Caller, lastId: string | undefined, listener: JobEventListener): Promise<Watch>;
  /** Called with the ids of every batch of jobs made durable; returns the unsubscribe function. */
  onCreated(listener: (ids: string[]) => void): () => void;
  /** Called with a job and its new state whenever a job's state changes; returns the unsubscribe function. */
  onStateChange(listener: StateListener): () => void;
  /** The accounts whose credits and usage a caller sees: their own, and the projects they lead. */
  accountsOf(caller: Caller): Promise<string[]>;
  wallets(caller: Caller): Promise<Wallet[]>;
  usage(caller: Caller, query: UsageQuery): Promise<Usage>;
  /**
   * Applies one update through the state machine, atomically, then tells followers and runs the
   * plugins' hooks; false when it was dropped.
   */
  update(
    id: string,
    update: Omit<JobUpdate, 'timestamp'> & { timestamp?: number },
    extra?: JobChanges,
  ): Promise<boolean>;
  /** One monitoring pass over the running jobs (expiry, charges). */
  monitor(): Promise<void>;
  /**
   * Runs the backend loop as the leader, writing through `loopStore` (the store fenced by this
   * replica's epoch): catches up from the store — reconciles it with the backend, adopts the jobs
   * never submitted — then submits, follows the backend, monitors every `monitorIntervalMs` and
   * restarts. Acts on the cluster only while `holds()` (the lease is surely this replica's).
   * Answers how to stop leading.
   */
  lead(loopStore: Transactional, holds?: () => boolean): Promise<() => Promise<void>>;
  /** The embedded default: leads on the store itself. */
  start(): Promise<void>;
  /** Stops leading and writes the backend events already received; later ones are ignored. */
  stop(): Promise<void>;
}

export interface LeaderWrites {
  /** Adds a notice to a job's updates; false when it was dropped (the job ended). */
  addStatus(id: string, status: string): Promise<boolean>;
  /** Holds a queued job whose owner is over its storage quota, saying why (quota-hold.ts). */
  holdForQuota(id: string, problem: string): Promise<void>;
  /** Queues again a job held for its owner's quota. */
  releaseFromQuota(id: string): Promise<void>;
}
