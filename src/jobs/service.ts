import type { Job, JobUpdate } from '../model/job.ts';
import { PLUGINS } from '../plugins/index.ts';
import type { JobPlugin } from '../plugins/plugin.ts';
import type { InputStorage, JobStorage } from '../storage/job-storage.ts';
import type { JobChanges, Store } from '../store/store.ts';
import {
  type BrowseOptions,
  type Caller,
  jobAccess,
  type Usage,
  type UsageQuery,
  type Wallet,
} from './access.ts';
import type { Backend, LogChunk } from './backend.ts';
import { type ExtendItem, jobControl } from './control.ts';
import { type CreateOptions, jobIntake } from './intake.ts';
import { pluginHooks } from './job-management.ts';
import type { Logger } from './log.ts';
import { jobMonitor } from './monitor.ts';
import type { JobEnvironment } from './prepare.ts';
import { jobSubmission } from './submission.ts';
import { jobUpdates, type UpdateListener } from './updates.ts';

export type { BrowseOptions, Caller, Usage, UsageQuery, Wallet } from './access.ts';
export type { CreateOptions } from './intake.ts';
export type { Logger } from './log.ts';
export type { UpdateListener } from './updates.ts';

export interface ServiceOptions {
  store: Store;
  env: JobEnvironment;
  backend: Backend;
  plugins?: readonly JobPlugin[];
  storage?: JobStorage;
  /** Where jobs' input files and folders are checked at submit (400 when one is not there). */
  inputs?: InputStorage;
  now?: () => number;
  log?: Logger;
  /** How often running jobs are monitored (expiry, charges). */
  monitorIntervalMs?: number;
  /** Refuse jobs of owners without credits (402). */
  requireCredits?: boolean;
  /** First wait before submitting again to a backend that refused; it doubles each time. */
  submitRetryMs?: number;
}

/**
 * JobManagement as callers use it: accepts jobs, keeps them durable, drives them through their
 * lifecycle with the backend, runs every plugin hook in the list's order, and answers what
 * callers may see.
 */
export interface JobService {
  /** Checks the items whole, stores them durably, and answers their ids (once per Idempotency-Key). */
  create(caller: Caller, items: unknown, options?: CreateOptions): Promise<string[]>;
  browse(caller: Caller, options?: BrowseOptions): { items: Job[]; next: string | null };
  /** The job, or 404 when the caller may not see it. */
  retrieve(caller: Caller, id: string): Job;
  terminate(caller: Caller, ids: readonly string[]): Promise<void>;
  extend(caller: Caller, items: readonly ExtendItem[]): Promise<void>;
  /** Follows a job's updates from now on, with the job as it stands. */
  follow(caller: Caller, id: string, listener: UpdateListener): { job: Job; unsubscribe: () => void };
  logs(
    caller: Caller,
    id: string,
    options: { follow: boolean; signal?: AbortSignal },
  ): AsyncIterable<LogChunk>;
  /** Called with the ids of every batch of jobs made durable; returns the unsubscribe function. */
  onCreated(listener: (ids: string[]) => void): () => void;
  /** The accounts whose credits and usage a caller sees: their own, and the projects they lead. */
  accountsOf(caller: Caller): string[];
  wallets(caller: Caller): Wallet[];
  usage(caller: Caller, query: UsageQuery): Usage;
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
  /** Reconciles the store with the backend, then monitors every `monitorIntervalMs`. */
  start(): Promise<void>;
  /** Stops monitoring and writes the backend events already received; later ones are ignored. */
  stop(): Promise<void>;
}

/** The service from its parts: access, intake, submission, updates, monitoring and control. */
export function createJobService(options: ServiceOptions): JobService {
  const { store, env, backend } = options;
  const now = options.now ?? Date.now;
  const log = options.log;
  const requireCredits = options.requireCredits ?? true;
  const hooks = pluginHooks(options.plugins ?? PLUGINS, log);
  const access = jobAccess(store);
  const updates = jobUpdates({
    store,
    hooks,
    now,
    lifecycle: () => monitoring.lifecycle,
    ...(log ? { log } : {}),
  });
  const monitoring = jobMonitor({ store, env, backend, hooks, updates, access, now, requireCredits });
  const submission = jobSubmission({
    store,
    env,
    backend,
    hooks,
    updates,
    retryMs: options.submitRetryMs ?? 1000,
    ...(options.storage ? { storage: options.storage } : {}),
    ...(log ? { log } : {}),
  });
  const createdListeners = new Set<(ids: string[]) => void>();
  const intake = jobIntake({
    store,
    env,
    access,
    now,
    requireCredits,
    largestMachine: () => backend.largestMachine(),
    ...(options.inputs ? { storage: options.inputs } : {}),
    accepted(jobs) {
      const ids = jobs.map((j) => j.id);
      for (const l of createdListeners) l(ids);
      submission.accept(jobs);
    },
  });
  const control = jobControl({ store, env, backend, access, updates, monitor: monitoring, now });

  let monitorTimer: NodeJS.Timeout | undefined;
  let pass: Promise<void> | undefined;

  backend.onEvent(updates.onBackendEvent);

  return {
    create: intake.create,
    browse: access.browse,
    retrieve: (caller, id) => access.toJob(access.visibleJob(caller, id)),
    terminate: control.terminate,
    extend: control.extend,
    update: (id, u, extra) => updates.update(id, u, extra),
    monitor: monitoring.monitor,
    accountsOf: access.accountsOf,
    wallets: (caller) => access.wallets(caller, now()),
    usage: (caller, query) => access.usage(caller, query, now()),

    follow(caller, id, listener) {
      const record = access.visibleJob(caller, id);
      const unsubscribe = updates.listen(id, listener);
      return { job: access.toJob(record), unsubscribe };
    },

    logs(caller, id, o) {
      access.visibleJob(caller, id);
      return backend.logs(id, o);
    },

    onCreated(listener) {
      createdListeners.add(listener);
      return () => createdListeners.delete(listener);
    },

    async start() {
      await monitoring.recover(submission.enqueue);
      const interval = options.monitorIntervalMs ?? 1000;
      const tick = () => {
        pass = monitoring
          .monitor()
          .catch((e: unknown) => log?.error({ err: e }, 'monitoring failed'))
          .finally(() => {
            monitorTimer = setTimeout(tick, interval);
            monitorTimer.unref();
          });
      };
      monitorTimer = setTimeout(tick, interval);
      monitorTimer.unref();
    },

    async stop() {
      submission.stop();
      clearTimeout(monitorTimer);
      await pass;
      updates.stop();
    },
  };
}
