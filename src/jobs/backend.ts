import type { Duplex } from 'node:stream';
import type { JobBuild } from '../plugins/plugin.ts';
import type { SshEndpoint } from '../volcano/api/types.ts';

/**
 * What a backend reports about a job: it waits (with the reason, e.g. its queue position), it
 * runs, or it ended (with exit codes per rank). An event in the job's current state changes only
 * its status text.
 */
export interface BackendEvent {
  jobId: string;
  state: 'IN_QUEUE' | 'RUNNING' | 'SUCCESS' | 'FAILURE';
  status: string;
  exitCodes?: Record<string, number>;
  at: number;
}

export interface LogChunk {
  rank: number;
  stdout?: string;
  stderr?: string;
}

export interface ShellOptions {
  cols: number;
  rows: number;
}

/** An interactive shell: its terminal's bytes both ways, its size, and how it ended. */
export interface ShellStream extends Duplex {
  resize(o: ShellOptions): void;
  /** The shell's exit code once it has ended (128+n when signal n ended it); null when unknown. */
  readonly exitCode: Promise<number | null>;
}

/** What one rank of a running job uses now. Absent fields: the backend cannot tell (yet). */
export interface RankUsage {
  rank: number;
  /** CPU in cores (1: one core busy all the time). */
  cpuCores?: number;
  /** Memory in use, without reclaimable page cache (the working set). */
  memoryBytes?: number;
  /** How busy its GPUs are (0 to 1, the mean over them), where the backend sees GPUs. */
  gpuUtilization?: number;
  /** GPU memory in use, where the backend sees GPUs. */
  gpuMemoryBytes?: number;
}

/** What a machine offers a job. */
export interface MachineSize {
  cpuMillis: number;
  memoryBytes: number;
}

/**
 * The largest machine a backend has, and whether every replica of a job runs on that one machine
 * (so that together they must fit it) or each may run on a machine of its own.
 */
export interface LargestMachine extends MachineSize {
  holdsEveryReplica: boolean;
}

/** A backend's machines, one view for utilization and for the submit-time fit check. */
export interface Machines {
  /** The cores and bytes of memory of all of them together (utilization); zero while unknown. */
  total: { cpu: number; memory: number };
  /** The largest machine a job may be given, for refusing at submit one that never fits; null when unknown. */
  largest: LargestMachine | null;
}

/**
 * Told of a backend's event. Where it writes the event, it answers whether that was written (false:
 * never, here — this replica no longer leads): a backend removes an ended job's objects only once
 * its end is written, since until then they are what tells a new leader how the job ended.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a listener that only watches answers nothing.
export type BackendEventListener = (event: BackendEvent) => Promise<boolean> | void;

/**
 * Where jobs run. JobManagement hands it the built objects; it reports back through events.
 * Every operation is idempotent: a repeated submit or cancel after a crash does no harm.
 */
export interface Backend {
  readonly name: string;
  submit(jobId: string, build: JobBuild): Promise<void>;
  /** Stops every replica of the job; a job that is already gone is fine. */
  cancel(jobId: string): Promise<void>;
  /**
   * Stops every replica and forgets the job without reporting an end (UCloud's SUSPENDED): the
   * resources are freed, the job's folder and output stay, and a later `submit` of the same build
   * runs the same job again. A job the backend does not have is fine.
   */
  suspend(jobId: string): Promise<void>;
  /** The machines jobs run on, as last seen (never waits: submissions read it). */
  machines(): Machines;
  /** The deadline moved; backends that enforce time themselves are told. */
  extend(jobId: string, expiresAt: number): Promise<void>;
  /** Ids of the jobs this backend still has, for reconciliation after a restart. */
  knownJobs(): Promise<Set<string>>;
  onEvent(listener: BackendEventListener): void;
  /**
   * For backends that several replicas share (Kubernetes): whether this replica leads, and so acts
   * on what it follows — reports jobs' states, saves the logs of ended jobs and removes their
   * objects, creates submitted jobs. A follower only reads (logs, shells, ports) and does what its
   * own API wrote (cancel, suspend). `leads` is asked before each such act (false: it follows);
   * leading from the start. When leading again, every job followed is reported again, for the new
   * leader to catch up on.
   */
  setLeading?(leads: (() => boolean) | false): void;
  /**
   * Resolves once what this backend has seen so far is reported and each report answered (written,
   * or refused): a job that ended there is no longer RUNNING in the store. A monitoring pass waits
   * for it, so that it charges no job for time past an end the backend knows of — a new leader's
   * first pass included, after the jobs' ends while none led. Backends that report each change as
   * they see it need not answer.
   */
  caughtUp?(): Promise<void>;
  /** Log chunks of every rank; with `follow`, until the job ends or `signal` aborts. */
  logs(jobId: string, options: { follow: boolean; signal?: AbortSignal }): AsyncIterable<LogChunk>;
  /**
   * Why the logs of a job this backend ran are no longer there (removed by its retention), or
   * undefined while it keeps them. Asked only of jobs that started and ended; backends that keep
   * ended jobs' logs as long as they keep anything need not answer.
   */
  logsRemoved?(jobId: string): string | undefined;
  /** An interactive shell in one replica. */
  shell(jobId: string, rank: number, options: ShellOptions): Promise<ShellStream>;
  /** A byte stream to a port of one replica, for the session proxy. */
  connect(jobId: string, rank: number, port: number): Promise<Duplex>;
  /**
   * What each rank of these jobs uses now, for the live resource views: one call for all running
   * jobs, made on a steady period. Jobs it does not run are left out.
   */
  usage(jobIds: readonly string[]): Promise<Map<string, RankUsage[]>>;
  /**
   * Where users reach port 22 of the running job's rank 0 from outside (sshEnabled jobs): opened
   * on the first call, the same endpoint afterwards, released when the job ends or is suspended.
   */
  sshEndpoint(jobId: string): Promise<SshEndpoint>;
  close(): Promise<void>;
}
