import { systemClock, type Timer } from '../model/clock.ts';
import { isFinal } from '../model/job-states.ts';
import { PLUGINS } from '../plugins/index.ts';
import type { PreparedJob } from '../plugins/plugin.ts';
import type { Transactional } from '../store/store.ts';
import { adoptCreated } from './adoption.ts';
import { jobControl } from './control.ts';
import { logsGone } from './errors.ts';
import { jobIntake, newJobOf } from './intake.ts';
import { type JobEngine, jobEngine } from './job-engine.ts';
import { jobEvents } from './job-events.ts';
import { pluginHooks } from './job-management.ts';
import { findProduct } from './prepare.ts';
import { presentJob } from './presentation.ts';
import { quotaProblemOf } from './quota-hold.ts';
import { runningPages } from './running-pages.ts';
import type { JobService, ServiceOptions } from './service-contract.ts';
import { updateListeners } from './update-listeners.ts';

export type { BrowseOptions, Caller, Usage, UsageQuery, Wallet } from './access.ts';
export type { RenameItem } from './control.ts';
export type { CreateOptions } from './intake.ts';
export type { JobEvent, JobEventListener, Watch } from './job-events.ts';
export type { IncludeFlags } from './presentation.ts';
export type {
  JobPage,
  JobService,
  LeaderWrites,
  ServiceOptions,
  Utilization,
} from './service-contract.ts';
export type { UpdateListener } from './update-listeners.ts';

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
    /** Stops queuing the jobs other replicas accept as they commit (this replica queues its own). */
    let stopAdopting = () => {};
    try {
      if (options.replicated) stopAdopting = await adoptCreated(store, submission.enqueue, log);
      await m.recover(submission.enqueue);
      await restarts.recover();
    } catch (err) {
      // Not leading after all (deposed, or the store failed): the next attempt starts again.
      stopAdopting();
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
      stopAdopting();
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
