import { type Clock, systemClock, type Timer } from '../model/clock.ts';
import type { Job, JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import { PLUGINS } from '../plugins/index.ts';
import type { JobPlugin, PreparedJob } from '../plugins/plugin.ts';
import type { InputStorage, JobStorage } from '../storage/job-storage.ts';
import type { JobChanges } from '../store/jobs.ts';
import type { Store, Transactional } from '../store/store.ts';
import type { BrowseOptions, Caller, Usage, UsageQuery, Wallet } from './access.ts';
import type { Backend, LogChunk } from './backend.ts';
import { type ExtendItem, jobControl, type RenameItem } from './control.ts';
import { logsGone } from './errors.ts';
import { type CreateOptions, jobIntake, newJobOf, type QuotaCheck } from './intake.ts';
import { type JobEngine, jobEngine } from './job-engine.ts';
import { type JobEventListener, jobEvents, type Watch } from './job-events.ts';
import { pluginHooks } from './job-management.ts';
import type { Logger } from './log.ts';
import type { JobMirror } from './mirror.ts';
import { findProduct, type JobEnvironment } from './prepare.ts';
import { type IncludeFlags, presentJob } from './presentation.ts';
import { quotaProblemOf } from './quota-hold.ts';
import { runningPages } from './running-pages.ts';
import { type StateListener, type UpdateListener, updateListeners } from './update-listeners.ts';

export type { BrowseOptions, Caller, Usage, UsageQuery, Wallet } from './access.ts';
export type { RenameItem } from './control.ts';
export type { CreateOptions } from './intake.ts';
export type { JobEvent, JobEventListener, Watch } from './job-events.ts';
export type { IncludeFlags } from './presentation.ts';

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
export type { UpdateListener } from './update-listeners.ts';

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

/** How often running jobs are monitored (charged, expired) unless configured. */
const MONITOR_INTERVAL_MS = 1000;

/** The service from its parts: access, intake, submission, updates, monitoring and control. */
export function createJobService(options: ServiceOptions): JobService {
  const { store, env, backend } = options;
  const clock = options.clock ?? systemClock;
  const now = () => clock.now();
  const log = options.log;
  const requireCredits = options.requireCredits ?? true;
  const hooks = pluginHooks(options.plugins ?? PLUGINS, log);
  const listeners = updateListeners();
  const quotaProblem = options.quotas ? quotaProblemOf(options.quotas) : undefined;
  const engineOf = (on: Transactional): JobEngine =>
    jobEngine(on, {
      env,
      backend,
      hooks,
      listeners,
      clock,
      requireCredits,
      submitRetryMs: options.submitRetryMs ?? 1000,
      ...(options.storage ? { storage: options.storage } : {}),
      ...(log ? { log } : {}),
      ...(options.mirror ? { mirror: options.mirror } : {}),
      ...(quotaProblem ? { quotaProblem } : {}),
    });
  // What this replica's API is asked to do (cancel, extend, suspend …) it writes itself, on any
  // replica; the backend loop is the leader's, on the store fenced by its epoch.
  const own = engineOf(store);
  const { access, updates, monitoring } = own;
  /** The backend loop's engine while this replica leads; its own engine when it is its own leader. */
  let loop: JobEngine | undefined = options.replicated ? undefined : own;
  /** Queues a job for submission; a follower leaves that to the leader, which adopts it. */
  const resubmit = (id: string) => loop?.submission.enqueue(id);
  const events = jobEvents({ store, access, env, ...(log ? { log } : {}) });
  const createdListeners = new Set<(ids: string[]) => void>();
  const intake = jobIntake({
    store,
    env,
    access,
    now,
    requireCredits,
    monitorIntervalMs: options.monitorIntervalMs ?? MONITOR_INTERVAL_MS,
    largestMachine: () => backend.machines().largest,
    ...(options.inputs ? { storage: options.inputs } : {}),
    ...(options.quotas ? { quotas: options.quotas } : {}),
    accepted(jobs) {
      const ids = jobs.map((j) => j.id);
      for (const l of createdListeners) l(ids);
      loop?.submission.accept(jobs);
    },
  });
  const controlOf = (engine: JobEngine, on: Transactional) =>
    jobControl({
      store: on,
      env,
      backend,
      access: engine.access,
      updates: engine.updates,
      monitor: engine.monitoring,
      hooks,
      resubmit,
      now,
      ...(options.mirror ? { mirror: options.mirror } : {}),
      ...(quotaProblem ? { quotaProblem } : {}),
    });
  const control = controlOf(own, store);
  /** The backend loop's control (its writes fenced as the loop's) while this replica leads. */
  let loopControl = loop && control;
  const leaderControl = () => {
    if (loop && loopControl) return { engine: loop, control: loopControl };
    throw new Error('this replica does not lead: the leader writes this');
  };

  /** Stops the loop under way. */
  let leading: (() => Promise<void>) | undefined;
  // A follower writes no backend event (its backend reports none while it follows).
  backend.onEvent((event) => loop?.updates.onBackendEvent(event) ?? Promise.resolve(false));

  async function lead(loopStore: Transactional, holds?: () => boolean): Promise<() => Promise<void>> {
    const engine = loopStore === store ? own : engineOf(loopStore);
    const { monitoring: m, submission, restarts } = engine;
    loop = engine;
    loopControl = engine === own ? control : controlOf(engine, loopStore);
    backend.setLeading?.(holds ?? (() => true));
    try {
      await m.recover(submission.enqueue);
      await restarts.recover();
    } catch (err) {
      // Not leading after all (deposed, or the store failed): the next attempt starts again.
      if (options.replicated) {
        loop = undefined;
        loopControl = undefined;
        backend.setLeading?.(false);
        submission.stop();
        restarts.stop();
        await engine.updates.stop();
      }
      throw err;
    }
    let timer: Timer | undefined;
    let pass: Promise<void> | undefined;
    let stopped = false;
    const interval = options.monitorIntervalMs ?? MONITOR_INTERVAL_MS;
    const prune = events.pruner(loopStore, now);
    const tick = () => {
      pass = m
        .adopt(submission.enqueue)
        .then(() => m.monitor())
        .then(prune)
        .catch((e: unknown) => log?.error({ err: e }, 'monitoring failed'))
        .finally(() => {
          if (!stopped) timer = clock.setTimeout(tick, interval);
        });
    };
    timer = clock.setTimeout(tick, interval);
    return async () => {
      stopped = true;
      if (options.replicated) {
        loop = undefined;
        loopControl = undefined;
        backend.setLeading?.(false);
      }
      submission.stop();
      restarts.stop();
      timer?.cancel();
      await pass;
      await engine.updates.stop();
    };
  }

  return {
    create: intake.create,
    async admit(jobs) {
      const fresh = await store.transaction(
        async (tx) => {
          const unknown: PreparedJob[] = [];
          for (const job of new Map(jobs.map((job) => [job.id, job])).values()) {
            if (!(await tx.jobs.get(job.id))) unknown.push(job);
          }
          await tx.jobs.insert(unknown.map((job) => newJobOf(job)));
          return unknown;
        },
        { durable: true },
      );
      const ids = fresh.map((j) => j.id);
      if (ids.length > 0) for (const l of createdListeners) l(ids);
      loop?.submission.accept(fresh);
      return ids;
    },
    stopJobsOf: (account, category, status) => monitoring.lifecycle.stopJobsOf(account, category, status),
    async browse(caller, o = {}) {
      const page = await access.browse(caller, o, env.config.provider);
      return { ...page, items: page.items.map((job) => presentJob(job, env, o)) };
    },
    retrieve: async (caller, id, flags) =>
      presentJob(await access.toJob(await access.visibleJob(caller, id)), env, flags),
    terminate: control.terminate,
    extend: control.extend,
    suspend: control.suspend,
    unsuspend: control.unsuspend,
    leader: {
      addStatus: async (id, status) => leaderControl().engine.updates.update(id, { status }),
      holdForQuota: async (id, problem) => leaderControl().control.holdForQuota(id, problem),
      releaseFromQuota: async (id) => leaderControl().control.releaseFromQuota(id),
    },
    rename: control.rename,

    async utilization(caller, jobId) {
      await access.visibleJob(caller, jobId);
      const used = { cpu: 0, memory: 0 };
      let running = 0;
      for await (const page of runningPages((after, limit) => store.jobs.running(after, limit))) {
        running += page.length;
        for (const job of page) {
          const { id, category } = job.specification.product;
          const product = findProduct(env.products, id, category);
          if (!product) continue;
          const replicas = job.specification.replicas ?? 1;
          used.cpu += product.cpu * replicas;
          used.memory += product.memoryInGigs * 2 ** 30 * replicas;
        }
      }
      const pending = (await store.jobs.countByState()).IN_QUEUE ?? 0;
      return {
        capacity: backend.machines().total,
        usedCapacity: used,
        queueStatus: { running, pending },
      };
    },
    update: (id, u, extra) => updates.update(id, u, extra),
    monitor: () => (loop ?? own).monitoring.monitor(),
    accountsOf: access.accountsOf,
    wallets: (caller) => access.wallets(caller, now()),
    usage: (caller, query) => access.usage(caller, query, now()),

    async follow(caller, id, listener) {
      // Following first, then read: what the job holds already is not told again (follow.ts).
      const unsubscribe = await events.follow(id, listener);
      const record = await access.visibleJob(caller, id).catch((e: unknown) => {
        unsubscribe();
        throw e;
      });
      const flags = { includeApplication: true, includeProduct: true, includeSupport: true };
      return { job: presentJob(await access.toJob(record), env, flags), unsubscribe };
    },

    async *logs(caller, id, o) {
      const record = await access.visibleJob(caller, id);
      const ran = isFinal(record.state) && record.startedAt !== null;
      const removed = ran ? backend.logsRemoved?.(id) : undefined;
      if (removed !== undefined) throw logsGone(`the job's logs are gone: ${removed}`);
      yield* backend.logs(id, o);
    },

    watchJobs: events.watch,

    onCreated(listener) {
      createdListeners.add(listener);
      return () => createdListeners.delete(listener);
    },
    onStateChange: listeners.onStateChange,

    lead,

    async start() {
      leading = await lead(store);
    },

    async stop() {
      await leading?.();
      leading = undefined;
      own.submission.stop();
      own.restarts.stop();
      await updates.stop();
    },
  };
}
