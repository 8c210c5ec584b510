import type { Clock } from '../model/clock.ts';
import type { JobState, JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { ActiveJob, LifecycleContext } from '../plugins/plugin.ts';
import type { JobChanges, JobRecord, RunningJob, UpdateWrite } from '../store/jobs.ts';
import { FencedError } from '../store/leases.ts';
import type { StoreParts, Transactional, TransactionOptions } from '../store/store.ts';
import { ownerOf } from './access.ts';
import type { BackendEvent } from './backend.ts';
import type { PluginHooks } from './job-management.ts';
import { asDecidedEnd, decideUpdate } from './lifecycle.ts';
import type { Logger } from './log.ts';
import type { JobMirror } from './mirror.ts';
import { isRestartExit, restartExit } from './restart-policy.ts';
import type { UpdateListeners } from './update-listeners.ts';

// Updates: every change of a job goes through the state machine in a transaction, then to the
// job's followers and the plugins' hooks. Backend events arrive here too, written in batches.

export type { StateListener, UpdateListener } from './update-listeners.ts';

export interface UpdatesOptions {
  store: Transactional;
  /** Who is told of the updates written here. */
  listeners: UpdateListeners;
  hooks: PluginHooks;
  /** What the hooks may do; read when a hook runs (it needs `update` itself). */
  lifecycle: () => LifecycleContext;
  /** Called when a restartOnExit job's end was written as SUSPENDED, to run it again. */
  exited: (id: string) => void;
  /** What updates are stamped with, and a write that failed waits on before it is tried again. */
  clock: Clock;
  log?: Logger;
  /** Told of every update in the transaction that writes it. */
  mirror?: JobMirror;
}

interface Applied {
  id: string;
  update: JobUpdate;
  previous: JobState;
  next: JobState;
  /** The job as its hooks see it, read in the same transaction, when hooks are due. */
  job?: ActiveJob;
  /** The job's row as this update left it. */
  after: JobRecord;
}

/** A backend event waiting to be written, and whom to tell whether it was. */
interface PendingEvent {
  event: BackendEvent;
  written: (written: boolean) => void;
}

/** Wait before writing again backend events that could not be written (a full disk). */
const EVENT_RETRY_MS = 1000;

/** A stored job as the plugins see it, with its build's annotations. */
export function asActiveJob(record: RunningJob, annotations: Readonly<Record<string, string>>): ActiveJob {
  return {
    id: record.id,
    owner: ownerOf(record),
    state: record.state,
    startedAt: record.startedAt,
    expiresAt: record.expiresAt,
    chargedPeriods: record.chargedPeriods,
    runStartedAt: record.runStartedAt,
    timeRunBeforeMs: record.timeRunBeforeMs,
    annotations,
    outcome: record.outcome,
  };
}

/** A stored job as the plugins see it; undefined once it has ended (its build is gone). */
export function activeJob(record: JobRecord): ActiveJob | undefined {
  return record.annotations === null ? undefined : asActiveJob(record, record.annotations);
}

export type JobUpdates = ReturnType<typeof jobUpdates>;

export function jobUpdates(o: UpdatesOptions) {
  const { store, hooks, clock, log } = o;
  const now = () => clock.now();
  const { listeners } = o;
  let stopped = false;

  /**
   * Decides one update of a job read (locked) in the same transaction: what to write, and what was
   * applied; undefined when it does not apply. A job that ends loses its build in the same write
   * (only active jobs need one); its hooks get the job as it was read here.
   */
  function decide(
    before: JobRecord,
    given: JobUpdate,
    extra: JobChanges,
  ): { write: UpdateWrite; applied: Applied } | undefined {
    const { id } = before;
    const u = asDecidedEnd(before, given);
    const decision = decideUpdate(before, u);
    if (decision.kind !== 'apply') return undefined;
    const next = decision.changes.state ?? before.state;
    const ending = next !== before.state && isFinal(next);
    const starting = next === 'RUNNING' && before.state !== 'RUNNING' && hooks.hasStart;
    // A restartOnExit job's run ended: it pays for it as for a suspension.
    const exiting = isRestartExit(u) && before.state === 'RUNNING';
    const changes = { ...decision.changes, ...extra, ...(ending ? { build: null } : {}) };
    const { build, ...columns } = changes;
    // Its hooks see the build it had, or the one this update saves; its end removes it after them.
    const saved = extra.build ? { annotations: extra.build.annotations } : {};
    const job =
      ending || starting || exiting ? activeJob({ ...before, ...columns, ...saved, state: next }) : undefined;
    const annotations = build === undefined ? before.annotations : (build?.annotations ?? null);
    const after = { ...before, ...columns, annotations, updateCount: before.updateCount + 1 };
    return {
      write: { job: before, update: u, changes },
      applied: { id, update: u, previous: before.state, next, after, ...(job ? { job } : {}) },
    };
  }

  /** Writes decided updates (one statement for all on PostgreSQL), each told to the mirror. */
  async function writeDecided(tx: StoreParts, decided: readonly { write: UpdateWrite }[]): Promise<void> {
    const [one] = decided;
    if (decided.length === 1 && one)
      await tx.jobs.appendUpdate(one.write.job, one.write.update, one.write.changes);
    else if (decided.length > 1) await tx.jobs.appendUpdates(decided.map((d) => d.write));
    for (const { write } of decided) await o.mirror?.updateWritten(tx, write.job.id, write.update);
  }

  /** Tells followers, then runs the plugins' hooks for a change of state. */
  async function applied(a: Applied): Promise<void> {
    if (a.next !== a.previous) listeners.stateChanged(a.id, a.next);
    const lifecycle = o.lifecycle();
    if (isRestartExit(a.update)) {
      if (a.job) await hooks.suspend(lifecycle, a.job);
      o.exited(a.id);
      return;
    }
    if (!a.job) return;
    if (a.next === 'RUNNING') await hooks.start(lifecycle, a.job);
    if (isFinal(a.next)) {
      await hooks.complete(lifecycle, a.job);
      await hooks.cleanup(lifecycle, a.id);
    }
  }

  /**
   * Applies one update through the state machine, atomically, with the column changes `extra`
   * (written only if it applies); then tells followers and runs the plugins' onJobStart, or
   * onJobComplete and onCleanup. Returns false when it was dropped.
   */
  async function update(
    id: string,
    partial: Omit<JobUpdate, 'timestamp'> & { timestamp?: number },
    extra: JobChanges = {},
  ): Promise<boolean> {
    const u: JobUpdate = { ...partial, timestamp: partial.timestamp ?? now() };
    const result = await store.transaction(async (tx) => {
      const before = await tx.jobs.get(id);
      const d = before && decide(before, u, extra);
      if (d) await writeDecided(tx, [d]);
      return d?.applied;
    });
    if (result) await applied(result);
    return result !== undefined;
  }

  /**
   * Applies updates of several jobs as `update` does each, in one transaction (their jobs read in
   * one statement, their writes in one more on PostgreSQL) with `options`; answers, for each,
   * whether it applied.
   */
  async function updateMany(
    items: readonly {
      id: string;
      update: Omit<JobUpdate, 'timestamp'> & { timestamp?: number };
      extra?: JobChanges;
    }[],
    options: TransactionOptions = {},
  ): Promise<boolean[]> {
    if (items.length === 0) return [];
    const at = now();
    const stamped = items.map((i) => ({
      id: i.id,
      update: { ...i.update, timestamp: i.update.timestamp ?? at },
      extra: i.extra ?? {},
    }));
    const results = await store.transaction(async (tx) => {
      // Each decided on its job as the ones before it in the list left it.
      const jobs = await tx.jobs.getMany(stamped.map((i) => i.id));
      const decided = stamped.map((i) => {
        const before = jobs.get(i.id);
        const d = before && decide(before, i.update, i.extra);
        if (d) jobs.set(i.id, d.applied.after);
        return d;
      });
      await writeDecided(
        tx,
        decided.filter((d) => d !== undefined),
      );
      return decided.map((d) => d?.applied);
    }, options);
    for (const r of results) if (r) await applied(r);
    return results.map((r) => r !== undefined);
  }

  // Backend events that arrive together are written in one transaction, one batch at a time: a
  // backend reports many jobs at once, and each transaction is a write to the log.
  let events: PendingEvent[] = [];
  /** The batch being written, if one is. */
  let writing: Promise<void> | undefined;

  /** Answers once the event is written (true), or when it never will be here (false: stopped, deposed). */
  function onBackendEvent(event: BackendEvent): Promise<boolean> {
    if (stopped) return Promise.resolve(false);
    return new Promise((written) => {
      if (events.length === 0 && !writing) setImmediate(applyEvents);
      events.push({ event, written });
    });
  }

  function applyEvents(): void {
    if (events.length === 0 || writing) return;
    const batch = events;
    events = [];
    writing = writeEvents(batch.map((p) => p.event)).then(
      (results) => {
        writing = undefined;
        for (const p of batch) p.written(true);
        applyEvents();
        // Each job's in order (started, then ended), the jobs side by side: the charges of the jobs
        // that ended together are then written together (charging.ts).
        const byJob = new Map<string, Applied[]>();
        for (const r of results) byJob.set(r.id, [...(byJob.get(r.id) ?? []), r]);
        for (const rs of byJob.values()) {
          (async () => {
            for (const r of rs) await applied(r);
          })().catch((err: unknown) => log?.error({ err }, 'could not apply backend events'));
        }
      },
      (err: unknown) => {
        writing = undefined;
        if (err instanceof FencedError) {
          // Deposed: nothing of this leader's is written any more; the new leader hears it all again.
          stopped = true;
          for (const p of [...batch, ...events]) p.written(false);
          events = [];
          return;
        }
        // Nothing of the batch was written (one transaction): keep it, before any later events, and
        // try again, so that a full disk delays a job's end rather than leaving it RUNNING forever.
        log?.error({ err, events: batch.length }, 'could not write backend events; trying again');
        events = [...batch, ...events];
        if (!stopped) clock.setTimeout(applyEvents, EVENT_RETRY_MS);
      },
    );
  }

  function writeEvents(batch: readonly BackendEvent[]): Promise<Applied[]> {
    return store.transaction(async (tx) => {
      const results: Applied[] = [];
      // The batch's jobs read (and locked) in one statement, its updates written in one more; a job
      // updated already in this batch (RUNNING then its end) is taken as that update left it.
      const jobs = await tx.jobs.getMany(batch.map((e) => e.jobId));
      let pending: { write: UpdateWrite }[] = [];
      const flush = async () => {
        await writeDecided(tx, pending);
        pending = [];
      };
      for (const e of batch) {
        const before = jobs.get(e.jobId);
        // A suspended job is in no backend: what arrives for it was said before it was suspended.
        if (!before || before.state === 'SUSPENDED') continue;
        // The same state again is news about the job (a queue position, ready replicas): status only.
        let u: JobUpdate =
          before.state === e.state
            ? { status: e.status, timestamp: e.at, expectedState: e.state }
            : { state: e.state, status: e.status, timestamp: e.at, expectedDifferentState: true };
        const exitCodes = e.exitCodes ? { exitCodes: e.exitCodes } : {};
        let d: ReturnType<typeof decide>;
        if (u.state !== undefined && isFinal(u.state) && restartsOnExit(before)) {
          // Its updates read with those of this batch before it written.
          await flush();
          u = restartExit({ status: e.status, timestamp: e.at }, await tx.jobs.updatesOf(e.jobId));
          // The backend no longer has it: the next submission sends it again.
          d = decide(before, u, { ...exitCodes, submitted: false });
        } else {
          d = decide(before, u, exitCodes);
        }
        if (d) {
          pending.push(d);
          results.push(d.applied);
          jobs.set(e.jobId, d.applied.after);
        }
      }
      await flush();
      return results;
    });
  }

  /**
   * Whether the end the backend reports is an exit to restart from (UCloud's allowRestart): not
   * when ucompute is ending the job for good (cancel, expiry, credits).
   */
  function restartsOnExit(job: JobRecord): boolean {
    return job.specification.restartOnExit === true && job.outcome === null;
  }

  return {
    update,
    updateMany,
    onBackendEvent,

    /** Writes the backend events already received; later ones are ignored. */
    async stop(): Promise<void> {
      stopped = true;
      while (writing) await writing;
      applyEvents();
      while (writing) await writing;
      for (const p of events) p.written(false);
      events = [];
    },
  };
}
