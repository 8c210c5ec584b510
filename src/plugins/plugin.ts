import type { CheckedParameters } from '../catalog/parameters.ts';
import type { Application, Tool } from '../model/application.ts';
import type { ResolvedPipelineConfig } from '../model/config.ts';
import type { JobSpecification, JobState } from '../model/job.ts';
import type { Outcome } from '../model/outcome.ts';
import type { Owner } from '../model/owner.ts';
import type { Product } from '../model/product.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import type { Companion, SshEndpoint, VolcanoJob } from '../volcano/api/types.ts';

/** A job that passed validation: everything a plugin needs to know about it, resolved. */
export interface PreparedJob {
  id: string;
  owner: Owner;
  createdAt: number;
  specification: JobSpecification;
  application: Application;
  tool: Tool;
  product: Product;
  replicas: number;
  parameters: CheckedParameters;
  /** Null when the job runs without a time limit. */
  timeAllocationMillis: number | null;
  /** Whether the job gets an SSH endpoint: asked for where its application offers it, or required. */
  sshEnabled: boolean;
}

/** What `onCreate` builds: the Volcano Job, its companion objects, and what to report back. */
export interface JobBuild {
  volcanoJob: VolcanoJob;
  /** Objects submitted before the Volcano Job, in order (namespaces first). */
  companions: Companion[];
  /** The job folder, reported to the job as `outputFolder`. */
  outputFolder?: string;
}

/** Where a peer job's rank 0 can be reached; the address is known once the peer runs. */
export interface PeerLocation {
  namespace: string;
  address?: string;
}

export interface CreateContext {
  config: ResolvedPipelineConfig;
  peers: ReadonlyMap<string, PeerLocation>;
  storage?: JobStorage;
  /** The owner's SSH public keys (authorized_keys lines), read for jobs with sshEnabled. */
  authorizedKeys?: readonly string[];
}

/** A submitted job as the plugins see it after creation (do not mutate). */
export interface ActiveJob {
  id: string;
  owner: Owner;
  state: JobState;
  startedAt: number | null;
  expiresAt: number | null;
  /** Periods already charged to the owner's allocation, for every run of the job. */
  chargedPeriods: number;
  /** When the current run started; null while none is under way (queued, suspended). */
  runStartedAt: number | null;
  /** How long the job's runs before the current one ran, in all. */
  timeRunBeforeMs: number;
  /**
   * The annotations onCreate put on the Volcano Job: what the plugins keep of a job for its later
   * hooks (its charge basis, its time allocation, its SSH port).
   */
  annotations: Readonly<Record<string, string>>;
  /** How ucompute is ending the job, once it has decided to (a cancel, its owner's credits, expiry). */
  outcome: Outcome | null;
}

export interface Charge {
  job: ActiveJob;
  /** Which periods this charge covers, `<first>-<last>`: with the job id, its idempotency key. */
  firstPeriod: number;
  periods: number;
  units: number;
  credits: number;
  category: string;
}

/** What the lifecycle hooks may do; JobManagement provides it. */
export interface LifecycleContext {
  config: ResolvedPipelineConfig;
  now(): number;
  /** Ends a running job as EXPIRED. */
  expire(jobId: string): Promise<void>;
  /**
   * Records a charge once (a retry of the same periods records nothing), of only the periods the
   * owner's balance pays when credits are required; answers how many periods it could not pay
   * (`unpaid`) and the credits left beyond what the owner's active jobs hold back (this job's next
   * periods included): below 0, its jobs cannot all be paid for until their next charge.
   */
  charge(charge: Charge): Promise<{ creditsLeft: number; unpaid: number }>;
  /** Stops the active jobs of an account (`user:<name>`, `project:<id>`) in a product category. */
  stopJobsOf(account: string, category: string, status: string): Promise<void>;
  /** Opens (once) where users reach port 22 of the job's rank 0 (Backend.sshEndpoint). */
  sshEndpoint(jobId: string): Promise<SshEndpoint>;
  /** Adds a line to the job's updates without changing its state. */
  addStatus(jobId: string, status: string): Promise<void>;
}

/**
 * A job plugin (UCloud's JobManagementPlugin): a name and up to six hooks, no state of its own.
 * JobManagement calls every hook in the order of the one plugin list.
 */
export interface JobPlugin {
  readonly name: string;
  onCreate?(ctx: CreateContext, job: PreparedJob, build: JobBuild): void | Promise<void>;
  onJobStart?(ctx: LifecycleContext, job: ActiveJob): void | Promise<void>;
  onJobComplete?(ctx: LifecycleContext, job: ActiveJob): void | Promise<void>;
  /**
   * A running job's replicas were stopped to suspend it (before it is stored as SUSPENDED), or
   * ended in a restartOnExit job, which is SUSPENDED until it runs again.
   */
  onJobSuspend?(ctx: LifecycleContext, job: ActiveJob): void | Promise<void>;
  /** Must tolerate a cleanup that already partly happened. */
  onCleanup?(ctx: LifecycleContext, jobId: string): void | Promise<void>;
  onJobMonitoring?(ctx: LifecycleContext, batch: readonly ActiveJob[]): void | Promise<void>;
  /**
   * When `onJobMonitoring` next has something to do for this running job (epoch ms; null: nothing
   * ahead), so that a pass hands it only the jobs due. Without it, every pass hands it every job.
   */
  monitoringDueAt?(ctx: LifecycleContext, job: ActiveJob): number | null;
}
