import { createHash } from 'node:crypto';
import type { SimpleDuration } from '../model/application.ts';
import { durationMillis } from '../model/application.ts';
import { IssueList, ValidationError } from '../model/errors.ts';
import { newJobId } from '../model/ids.ts';
import { isFinal, type Job, type JobState, type JobStatus, type JobUpdate } from '../model/job.ts';
import { accountOf, type Owner } from '../model/owner.ts';
import { PLUGINS } from '../plugins/index.ts';
import type {
  ActiveJob,
  Charge,
  JobBuild,
  JobPlugin,
  LifecycleContext,
  PeerLocation,
  PreparedJob,
} from '../plugins/plugin.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import type { JobChanges, JobRecord, JobVisibility, Store } from '../store/store.ts';
import { ownerNamespace } from '../volcano/names.ts';
import type { Backend, BackendEvent, LogChunk } from './backend.ts';
import { badRequest, conflict, forbidden, notFound, paymentRequired } from './errors.ts';
import { pluginHooks } from './job-management.ts';
import { decideUpdate } from './lifecycle.ts';
import { findProduct, type JobEnvironment, maxTimeAllocationMillis, prepareJob } from './prepare.ts';

export interface Caller {
  username: string;
  admin: boolean;
}

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ServiceOptions {
  store: Store;
  env: JobEnvironment;
  backend: Backend;
  plugins?: readonly JobPlugin[];
  storage?: JobStorage;
  now?: () => number;
  log?: Logger;
  /** How often running jobs are monitored (expiry, charges). */
  monitorIntervalMs?: number;
  /** Refuse jobs of owners without credits (402). */
  requireCredits?: boolean;
  /** First wait before submitting again to a backend that refused; it doubles each time. */
  submitRetryMs?: number;
}

export interface CreateOptions {
  project?: string;
  idempotencyKey?: string;
}

export interface BrowseOptions {
  itemsPerPage?: number;
  next?: string;
  filterState?: JobState;
  filterApplication?: string;
}

export interface Wallet {
  owner: string;
  category: string;
  allocated: number;
  used: number;
  balance: number;
}

/** A job's status as the API shows it, from its stored record. */
export function statusOf(record: JobRecord): JobStatus {
  return {
    state: record.state,
    ...(record.startedAt !== null ? { startedAt: record.startedAt } : {}),
    ...(record.expiresAt !== null ? { expiresAt: record.expiresAt } : {}),
    ...(record.exitCodes !== null ? { exitCode: record.exitCodes } : {}),
  };
}

export type UpdateListener = (update: JobUpdate, job: JobRecord) => void;

const MAX_ITEMS = 1000;
const MONITOR_BATCH = 256;
const SUBMIT_CONCURRENCY = 16;
const SUBMIT_ATTEMPTS = 5;
/** Wait before writing again backend events that could not be written (a full disk). */
const EVENT_RETRY_MS = 1000;

/**
 * JobManagement: accepts jobs, keeps them durable, drives them through their lifecycle with the
 * backend, runs every plugin hook in the list's order, and answers what callers may see.
 */
export function createJobService(options: ServiceOptions) {
  const { store, env, backend } = options;
  const now = options.now ?? Date.now;
  const log = options.log;
  const hooks = pluginHooks(options.plugins ?? PLUGINS, log);
  const requireCredits = options.requireCredits ?? true;
  const submitRetryMs = options.submitRetryMs ?? 1000;
  let stopped = false;
  const listeners = new Map<string, Set<UpdateListener>>();
  const createdListeners = new Set<(ids: string[]) => void>();

  // ---- who sees what -------------------------------------------------------------------------

  function visibility(caller: Caller): JobVisibility {
    const memberships = store.memberships(caller.username);
    return {
      username: caller.username,
      allOf: memberships.filter((m) => m.role !== 'USER').map((m) => m.projectId),
      ownOf: memberships.filter((m) => m.role === 'USER').map((m) => m.projectId),
    };
  }

  function canSee(caller: Caller, job: JobRecord): boolean {
    if (caller.admin) return true;
    if (job.project === null) return job.createdBy === caller.username;
    const role = store.memberships(caller.username).find((m) => m.projectId === job.project)?.role;
    return role === 'PI' || role === 'ADMIN' || (role === 'USER' && job.createdBy === caller.username);
  }

  /** The job if the caller may see it; otherwise 404, so that others' ids reveal nothing. */
  function visibleJob(caller: Caller, id: string): JobRecord {
    const job = typeof id === 'string' ? store.getJob(id) : undefined;
    if (!job || !canSee(caller, job)) throw notFound(`job ${id}`);
    return job;
  }

  function toJob(record: JobRecord): Job {
    const updates = store.updatesOf(record.id);
    return {
      id: record.id,
      owner: ownerOf(record),
      specification: record.specification,
      status: statusOf(record),
      updates,
      createdAt: record.createdAt,
      output: record.outputFolder !== null ? { outputFolder: record.outputFolder } : {},
      billing: { creditsCharged: record.creditsCharged, pricePerUnit: record.pricePerUnit },
    };
  }

  // ---- accounting ---------------------------------------------------------------------------

  /** The accounts whose credits a caller sees: their own, and the projects they lead. */
  function accountsOf(caller: Caller): string[] {
    return [
      accountOf({ createdBy: caller.username }),
      ...store
        .memberships(caller.username)
        .filter((m) => m.role !== 'USER')
        .map((m) => accountOf({ createdBy: caller.username, project: m.projectId })),
    ];
  }

  /** What an owner has left in a category: its valid allocations less what was drawn from them. */
  function wallet(account: string, category: string, at = now()): Wallet {
    const active = store.activeAllocations(account, category, at);
    const allocated = active.reduce((sum, a) => sum + a.credits, 0);
    const used = active.reduce((sum, a) => sum + a.used, 0);
    return { owner: account, category, allocated, used, balance: allocated - used };
  }

  // ---- creating jobs ------------------------------------------------------------------------

  interface Pending {
    records: { prepared: PreparedJob; price: number }[];
    username: string;
    idempotency?: { key: string; hash: string };
    resolve: (ids: string[]) => void;
    reject: (e: unknown) => void;
  }
  let batch: Pending[] = [];

  /** Commits every pending request in one transaction: one disk sync for many submissions. */
  function flush(): void {
    const pending = batch;
    batch = [];
    // Answers the requests whose jobs it inserted; the others repeat a key committed first.
    const commit = (group: Pending[]) =>
      store.transaction(
        () => {
          const fresh = new Set<Pending>();
          for (const p of group) {
            if (p.idempotency && store.idempotent(p.username, p.idempotency.key)) continue;
            fresh.add(p);
            for (const { prepared, price } of p.records) {
              store.insertJob({
                id: prepared.id,
                createdBy: prepared.owner.createdBy,
                project: prepared.owner.project ?? null,
                application: prepared.application.metadata.name,
                createdAt: prepared.createdAt,
                specification: prepared.specification,
                timeAllocationMs: prepared.timeAllocationMillis,
                pricePerUnit: price,
                firstUpdate: {
                  timestamp: prepared.createdAt,
                  state: 'IN_QUEUE',
                  status: 'The job is in the queue',
                },
              });
            }
            if (p.idempotency) {
              store.rememberIdempotent(
                p.username,
                p.idempotency.key,
                p.idempotency.hash,
                p.records.map((r) => r.prepared.id),
              );
            }
          }
          return fresh;
        },
        { durable: true },
      );
    // Answers the ids to submit: a repeat gets the first request's ids (409 for another body) and
    // submits nothing, or the job would be submitted twice.
    const settle = (p: Pending, fresh: ReadonlySet<Pending>): string[] => {
      const seen = !fresh.has(p) && p.idempotency && store.idempotent(p.username, p.idempotency.key);
      if (!seen) {
        for (const r of p.records)
          if (prepared.size < PREPARED_LIMIT) prepared.set(r.prepared.id, r.prepared);
        const ids = p.records.map((r) => r.prepared.id);
        p.resolve(ids);
        return ids;
      }
      if (seen.requestHash === p.idempotency?.hash) p.resolve(seen.jobIds);
      else p.reject(conflict('this Idempotency-Key was used for a different request'));
      return [];
    };
    try {
      const fresh = commit(pending);
      afterCreate(pending.flatMap((p) => settle(p, fresh)));
    } catch {
      // One bad request must not fail the others: commit them one by one.
      for (const p of pending) {
        try {
          afterCreate(settle(p, commit([p])));
        } catch (e) {
          p.reject(e);
        }
      }
    }
  }

  function afterCreate(ids: string[]): void {
    for (const l of createdListeners) l(ids);
    for (const id of ids) queueSubmission(id);
  }

  async function create(caller: Caller, items: unknown, opts: CreateOptions = {}): Promise<string[]> {
    if (!Array.isArray(items) || items.length === 0 || items.length > MAX_ITEMS) {
      throw new ValidationError([
        { path: 'items', message: `must be a list of 1 to ${MAX_ITEMS} job specifications` },
      ]);
    }
    if (opts.project !== undefined) {
      const member = store.memberships(caller.username).some((m) => m.projectId === opts.project);
      if (!member && !(caller.admin && store.projectExists(opts.project))) {
        throw forbidden(`you are not a member of project ${opts.project}`);
      }
    }
    const owner: Owner = {
      createdBy: caller.username,
      ...(opts.project !== undefined ? { project: opts.project } : {}),
    };

    let idempotency: Pending['idempotency'];
    if (opts.idempotencyKey !== undefined) {
      const hash = createHash('sha256')
        .update(JSON.stringify([opts.project ?? null, items]))
        .digest('hex');
      const seen = store.idempotent(caller.username, opts.idempotencyKey);
      if (seen) {
        if (seen.requestHash !== hash)
          throw conflict('this Idempotency-Key was used for a different request');
        return seen.jobIds;
      }
      idempotency = { key: opts.idempotencyKey, hash };
    }

    const createdAt = now();
    const issues = new IssueList();
    const records: Pending['records'] = [];
    items.forEach((item, i) => {
      try {
        const prepared = prepareJob(item, { id: newJobId(createdAt), owner, createdAt }, env);
        records.push({ prepared, price: prepared.product.pricePerUnit });
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        issues.addAll(e.issues.map((issue) => ({ ...issue, path: `items[${i}].${issue.path}` })));
      }
    });
    // A peer opens a network path both ways: it must be a job the caller may act on, still active.
    records.forEach(({ prepared }, i) => {
      for (const peer of prepared.parameters.peers) {
        const job = store.getJob(peer.jobId);
        const path = `items[${i}].specification`;
        if (!job || !canSee(caller, job)) {
          issues.add(path, `peer ${peer.hostname} names no job of yours (${peer.jobId})`);
        } else if (isFinal(job.state)) {
          issues.add(path, `peer ${peer.hostname} names a job that has ended (${peer.jobId})`);
        }
      }
    });
    issues.throwIfAny();

    if (requireCredits) {
      const account = accountOf(owner);
      for (const [i, { prepared }] of records.entries()) {
        if (prepared.product.pricePerUnit === 0) continue;
        const w = wallet(account, prepared.product.category);
        if (w.balance <= 0) {
          throw paymentRequired(
            `items[${i}]: ${account} has no credits left for ${prepared.product.category} (allocated ${w.allocated}, used ${w.used})`,
          );
        }
      }
    }

    return new Promise<string[]>((resolve, reject) => {
      // A millisecond of patience lets concurrent requests share one sync to disk.
      if (batch.length === 0) setTimeout(flush, 1);
      batch.push({
        records,
        username: caller.username,
        ...(idempotency ? { idempotency } : {}),
        resolve,
        reject,
      });
    });
  }

  // ---- submission ---------------------------------------------------------------------------

  // A FIFO with a moving head: shift() on a long backlog would copy it every time.
  let submitQueue: string[] = [];
  let submitHead = 0;
  /**
   * Jobs validated at creation and not yet built, so submission need not validate them again;
   * bounded, so that a backlog of accepted jobs does not live in memory (they are in the store).
   */
  const prepared = new Map<string, PreparedJob>();
  const PREPARED_LIMIT = 1000;
  const submitFailures = new Map<string, number>();
  let submitting = 0;

  function queueSubmission(id: string): void {
    submitQueue.push(id);
    pump();
  }

  function pump(): void {
    while (submitting < SUBMIT_CONCURRENCY && submitHead < submitQueue.length) {
      const id = submitQueue[submitHead++]!;
      if (submitHead === submitQueue.length) {
        submitQueue = [];
        submitHead = 0;
      }
      submitting++;
      submit(id)
        .catch((e: unknown) => log?.error({ err: e, jobId: id }, 'submission failed'))
        .finally(() => {
          submitting--;
          pump();
        });
    }
  }

  function ownerOf(record: JobRecord): Owner {
    return { createdBy: record.createdBy, ...(record.project !== null ? { project: record.project } : {}) };
  }

  function peerLocations(prepared: PreparedJob): Map<string, PeerLocation> {
    const peers = new Map<string, PeerLocation>();
    for (const peer of prepared.parameters.peers) {
      const record = store.getJob(peer.jobId);
      if (record) peers.set(peer.jobId, { namespace: ownerNamespace(env.config, ownerOf(record)) });
    }
    return peers;
  }

  /** Builds (once) and submits a stored job; the backend makes a repeated submit harmless. */
  async function submit(id: string): Promise<void> {
    const record = store.getJob(id);
    if (!record || isFinal(record.state) || record.submitted) return;
    let build: JobBuild;
    if (record.build === null) {
      let job = prepared.get(id);
      prepared.delete(id);
      try {
        job ??= prepareJob(
          record.specification,
          { id, owner: ownerOf(record), createdAt: record.createdAt },
          env,
        );
      } catch (e) {
        await update(id, {
          state: 'FAILURE',
          status: `The job can no longer be started: ${(e as Error).message}`,
        });
        return;
      }
      const created = await hooks.create(job, {
        config: env.config,
        peers: peerLocations(job),
        ...(options.storage ? { storage: options.storage } : {}),
      });
      if ('failure' in created) {
        await update(id, { state: 'FAILURE', status: `The job could not be created: ${created.failure}` });
        return;
      }
      build = created.build;
      // The build and the output folder it reports are written together, or not at all when the
      // job ended meanwhile.
      const json = JSON.stringify(build);
      const saved = await update(
        id,
        {
          ...(build.outputFolder !== undefined ? { outputFolder: build.outputFolder } : {}),
          expectedState: 'IN_QUEUE',
        },
        {},
        () => store.saveBuild(id, json),
      );
      if (!saved) return;
    } else {
      build = JSON.parse(record.build) as JobBuild;
    }
    try {
      await backend.submit(id, build);
      submitFailures.delete(id);
      store.markSubmitted(id);
      // Cancelled while the submission was under way: the backend must not keep it.
      if (isFinal(store.getJob(id)!.state)) await backend.cancel(id);
    } catch (e) {
      // A backend can refuse for a moment (an API server restarting): try again, waiting longer
      // each time, before the job fails. The job stays queued and durable meanwhile.
      const failures = (submitFailures.get(id) ?? 0) + 1;
      if (failures < SUBMIT_ATTEMPTS && !stopped) {
        submitFailures.set(id, failures);
        log?.warn({ err: e, jobId: id, attempt: failures }, 'the backend refused a job; trying again');
        setTimeout(() => queueSubmission(id), submitRetryMs * 2 ** (failures - 1)).unref();
        return;
      }
      submitFailures.delete(id);
      await update(id, { state: 'FAILURE', status: `The backend refused the job: ${(e as Error).message}` });
    }
  }

  // ---- updates ------------------------------------------------------------------------------

  interface Applied {
    id: string;
    update: JobUpdate;
    previous: JobState;
    next: JobState;
    /** The job as its hooks see it, read in the same transaction, when hooks are due. */
    job?: ActiveJob;
  }

  /**
   * Decides and writes one update; call inside a transaction. Undefined when it did not apply.
   * A job that ends loses its build in the same write (only active jobs need one); its hooks get
   * the job as it was read here.
   */
  function write(id: string, u: JobUpdate, extra: JobChanges, alongside?: () => void): Applied | undefined {
    const before = store.getJob(id);
    if (!before) return undefined;
    const decision = decideUpdate(before, u);
    if (decision.kind !== 'apply') return undefined;
    alongside?.();
    const next = decision.changes.state ?? before.state;
    const ending = next !== before.state && isFinal(next);
    const starting = next === 'RUNNING' && before.state !== 'RUNNING' && hooks.hasStart;
    const changes = { ...decision.changes, ...extra, ...(ending ? { build: null } : {}) };
    store.appendUpdate(before, u, changes);
    const job =
      ending || starting ? activeJob({ ...before, ...decision.changes, ...extra, state: next }) : undefined;
    return { id, update: u, previous: before.state, next, ...(job ? { job } : {}) };
  }

  /** Tells followers, then runs the plugins' hooks for a change of state. */
  async function applied(a: Applied): Promise<void> {
    notify(a.id, a.update);
    if (!a.job) return;
    if (a.next === 'RUNNING') await hooks.start(lifecycle, a.job);
    if (isFinal(a.next)) {
      await hooks.complete(lifecycle, a.job);
      await hooks.cleanup(lifecycle, a.id);
    }
  }

  /**
   * Applies one update through the state machine, atomically; then tells followers and runs the
   * plugins' onJobStart, or onJobComplete and onCleanup. Returns false when it was dropped.
   */
  async function update(
    id: string,
    partial: Omit<JobUpdate, 'timestamp'> & { timestamp?: number },
    extra: JobChanges = {},
    alongside?: () => void,
  ): Promise<boolean> {
    const u: JobUpdate = { ...partial, timestamp: partial.timestamp ?? now() };
    const result = store.transaction(() => write(id, u, extra, alongside));
    if (result) await applied(result);
    return result !== undefined;
  }

  function notify(id: string, u?: JobUpdate): void {
    const set = listeners.get(id);
    if (!set || !u) return;
    const job = store.getJob(id)!;
    for (const l of set) l(u, job);
  }

  function activeJob(record: JobRecord): ActiveJob | undefined {
    if (record.build === null) return undefined;
    const { volcanoJob } = JSON.parse(record.build) as JobBuild;
    return {
      id: record.id,
      owner: ownerOf(record),
      state: record.state,
      startedAt: record.startedAt,
      expiresAt: record.expiresAt,
      chargedPeriods: record.chargedPeriods,
      volcanoJob,
    };
  }

  /** What the lifecycle hooks may do: one object, made once. */
  const lifecycle: LifecycleContext = {
    config: env.config,
    now,
    expire: async (jobId) => {
      // Decided on the stored deadline: the caller's copy of the job may predate an extend.
      const job = store.getJob(jobId);
      if (job?.state !== 'RUNNING' || job.expiresAt === null || job.expiresAt > now()) return;
      await backend.cancel(jobId);
      await update(jobId, {
        state: 'EXPIRED',
        status: 'The job ran out of time',
        expectedState: 'RUNNING',
      });
    },
    charge: (c: Charge) => {
      const account = accountOf(c.job.owner);
      const last = c.firstPeriod + c.periods - 1;
      store.transaction(() => {
        // A charge must start where the recorded ones end: one computed from a stale copy of the
        // job (its final charge happened meanwhile) names other periods, so its id alone would
        // not stop it from charging them twice.
        if (store.getJob(c.job.id)?.chargedPeriods !== c.firstPeriod) return;
        store.charge({
          chargeId: `${c.job.id}:${c.firstPeriod}-${last}`,
          jobId: c.job.id,
          owner: account,
          category: c.category,
          units: c.units,
          periods: c.periods,
          credits: c.credits,
          chargedAt: now(),
        });
      });
      return {
        creditsLeft: requireCredits ? wallet(account, c.category).balance : Number.POSITIVE_INFINITY,
      };
    },
    stopJobsOf: async (account, category, status) => {
      for (const record of store.activeJobs()) {
        if (accountOf(ownerOf(record)) !== account) continue;
        if (record.specification.product.category !== category) continue;
        await stop(record.id, status);
      }
    },
  };

  /** Refuses (400) a total time allocation beyond the maximum of the job's product. */
  function beyondMaximum(job: JobRecord, totalMs: number, i: number): void {
    const { id, category } = job.specification.product;
    const product = findProduct(env.products, id, category);
    const maximum = product ? maxTimeAllocationMillis(product, env.config) : null;
    if (maximum === null || totalMs <= maximum) return;
    throw badRequest(
      `items[${i}].requestedTime: job ${job.id} would have ${totalMs / 3_600_000} hours; ${id} allows at most ${maximum / 3_600_000}`,
    );
  }

  async function stop(id: string, status: string): Promise<void> {
    await backend.cancel(id);
    await update(id, { state: 'SUCCESS', status, expectedDifferentState: true });
  }

  // Backend events that arrive together are written in one transaction: a backend reports many
  // jobs at once, and each transaction is a write to the log.
  let events: BackendEvent[] = [];

  function onBackendEvent(e: BackendEvent): void {
    if (stopped) return;
    if (events.length === 0) setImmediate(applyEvents);
    events.push(e);
  }

  function applyEvents(): void {
    if (events.length === 0) return;
    const batch = events;
    events = [];
    let results: Applied[];
    try {
      results = writeEvents(batch);
    } catch (err) {
      // Nothing of the batch was written (one transaction): keep it, before any later events, and
      // try again, so that a full disk delays a job's end rather than leaving it RUNNING forever.
      log?.error({ err, events: batch.length }, 'could not write backend events; trying again');
      events = [...batch, ...events];
      if (!stopped) setTimeout(applyEvents, EVENT_RETRY_MS).unref();
      return;
    }
    (async () => {
      for (const r of results) await applied(r);
    })().catch((err: unknown) => log?.error({ err }, 'could not apply backend events'));
  }

  function writeEvents(batch: readonly BackendEvent[]): Applied[] {
    return store.transaction(() =>
      batch.flatMap((e) => {
        const current = store.jobState(e.jobId);
        // The same state again is news about the job (a queue position, ready replicas): status only.
        const u: JobUpdate =
          current === e.state
            ? { status: e.status, timestamp: e.at, expectedState: e.state }
            : { state: e.state, status: e.status, timestamp: e.at, expectedDifferentState: true };
        return write(e.jobId, u, e.exitCodes ? { exitCodes: e.exitCodes } : {}) ?? [];
      }),
    );
  }

  // ---- monitoring ---------------------------------------------------------------------------

  let monitorTimer: NodeJS.Timeout | undefined;
  let monitoring: Promise<void> | undefined;

  /** One monitoring pass: running jobs, in batches, through every plugin's onJobMonitoring. */
  async function monitor(): Promise<void> {
    const running = store.runningJobs();
    for (let i = 0; i < running.length; i += MONITOR_BATCH) {
      const jobs = running.slice(i, i + MONITOR_BATCH).flatMap((r) => activeJob(r) ?? []);
      await hooks.monitoring(lifecycle, jobs);
    }
  }

  // ---- recovery -----------------------------------------------------------------------------

  /** Reconciles the store with the backend: resubmits what was never submitted, fails what is lost. */
  async function recover(): Promise<void> {
    const known = await backend.knownJobs();
    for (const record of store.activeJobs()) {
      if (!record.submitted) queueSubmission(record.id);
      else if (!known.has(record.id)) {
        await update(record.id, { state: 'FAILURE', status: 'ucompute lost track of this job' });
      }
    }
  }

  backend.onEvent(onBackendEvent);

  return {
    store,
    create,
    update,
    monitor,
    wallet,

    async start(): Promise<void> {
      await recover();
      const interval = options.monitorIntervalMs ?? 1000;
      const tick = () => {
        monitoring = monitor()
          .catch((e: unknown) => log?.error({ err: e }, 'monitoring failed'))
          .finally(() => {
            monitorTimer = setTimeout(tick, interval);
            monitorTimer.unref();
          });
      };
      monitorTimer = setTimeout(tick, interval);
      monitorTimer.unref();
    },

    /** Stops monitoring and writes the backend events already received; later ones are ignored. */
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(monitorTimer);
      await monitoring;
      applyEvents();
    },

    browse(caller: Caller, o: BrowseOptions = {}): { items: Job[]; next: string | null } {
      const limit = Math.min(Math.max(o.itemsPerPage ?? 50, 1), 250);
      const records = store.browseJobs({
        visibility: caller.admin ? 'all' : visibility(caller),
        ...(o.filterState !== undefined ? { state: o.filterState } : {}),
        ...(o.filterApplication !== undefined ? { application: o.filterApplication } : {}),
        ...(o.next !== undefined ? { before: o.next } : {}),
        limit: limit + 1,
      });
      const page = records.slice(0, limit);
      return { items: page.map(toJob), next: records.length > limit ? (page.at(-1)?.id ?? null) : null };
    },

    retrieve(caller: Caller, id: string): Job {
      return toJob(visibleJob(caller, id));
    },

    async terminate(caller: Caller, ids: readonly string[]): Promise<void> {
      const jobs = ids.map((id) => visibleJob(caller, id));
      for (const job of jobs)
        if (isFinal(job.state)) throw conflict(`job ${job.id} has already ended (${job.state})`);
      for (const job of jobs) await stop(job.id, 'The job was cancelled');
    },

    async extend(
      caller: Caller,
      items: readonly { jobId: string; requestedTime: SimpleDuration }[],
    ): Promise<void> {
      const jobs = items.map((item) => visibleJob(caller, item.jobId));
      items.forEach((item, i) => {
        const job = jobs[i]!;
        if (isFinal(job.state)) throw conflict(`job ${job.id} has already ended (${job.state})`);
        if (job.timeAllocationMs === null)
          throw badRequest(`items[${i}].jobId: job ${job.id} has no time limit to extend`);
        if (durationMillis(item.requestedTime) <= 0)
          throw badRequest(`items[${i}].requestedTime: must be longer than zero`);
        beyondMaximum(job, job.timeAllocationMs + durationMillis(item.requestedTime), i);
      });
      for (const [i, item] of items.entries()) {
        const added = durationMillis(item.requestedTime);
        // Read and write in one transaction, so that concurrent extends all count.
        let expiresAt: number | null = null;
        let ended: string | undefined;
        store.transaction(() => {
          const job = store.getJob(item.jobId)!;
          // Checked again on the stored allocation: concurrent extends add up.
          beyondMaximum(job, (job.timeAllocationMs ?? 0) + added, i);
          if (isFinal(job.state)) {
            ended = `job ${job.id} has already ended`;
            return;
          }
          // Past its deadline the job is being expired (the monitor may be cancelling it right
          // now): an extend accepted here would be lost, so it is refused.
          if (job.state === 'RUNNING' && job.expiresAt !== null && job.expiresAt <= now()) {
            ended = `job ${job.id} ran out of time`;
            return;
          }
          const u: JobUpdate = { timestamp: now(), newTimeAllocation: (job.timeAllocationMs ?? 0) + added };
          const decision = decideUpdate(job, u);
          if (decision.kind !== 'apply') return;
          store.appendUpdate(job, u, decision.changes);
          expiresAt = decision.changes.expiresAt ?? null;
        });
        if (ended !== undefined) throw conflict(ended);
        notify(item.jobId, store.updatesOf(item.jobId).at(-1));
        if (expiresAt !== null) await backend.extend(item.jobId, expiresAt);
      }
    },

    /** Follows a job's updates; returns the unsubscribe function. */
    follow(caller: Caller, id: string, listener: UpdateListener): { job: Job; unsubscribe: () => void } {
      const record = visibleJob(caller, id);
      let set = listeners.get(id);
      if (!set) {
        set = new Set();
        listeners.set(id, set);
      }
      set.add(listener);
      return {
        job: toJob(record),
        unsubscribe: () => {
          set.delete(listener);
          if (set.size === 0) listeners.delete(id);
        },
      };
    },

    logs(caller: Caller, id: string, o: { follow: boolean; signal?: AbortSignal }): AsyncIterable<LogChunk> {
      visibleJob(caller, id);
      return backend.logs(id, o);
    },

    onCreated(listener: (ids: string[]) => void): () => void {
      createdListeners.add(listener);
      return () => createdListeners.delete(listener);
    },

    accountsOf,

    wallets(caller: Caller): Wallet[] {
      const at = now();
      return accountsOf(caller).flatMap((account) => {
        const categories = new Set(store.allocations(account).map((a) => a.category));
        return [...categories].map((category) => wallet(account, category, at));
      });
    },
  };
}

export type JobService = ReturnType<typeof createJobService>;
