import type { JobUpdate } from '../model/job.ts';
import type { Outcome } from '../model/outcome.ts';
import { accountOf } from '../model/owner.ts';
import type { ActiveJob, LifecycleContext } from '../plugins/plugin.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import { type JobAccess, ownerOf } from './access.ts';
import type { Backend } from './backend.ts';
import { jobCharging } from './charging.ts';
import type { PluginHooks } from './job-management.ts';
import type { JobMirror } from './mirror.ts';
import type { JobEnvironment } from './prepare.ts';
import { runningPages } from './running-pages.ts';
import { asActiveJob, buildAnnotations, type JobUpdates } from './updates.ts';

// Monitoring and recovery: what the lifecycle hooks may do (expire, charge, stop an owner's
// jobs), the periodic pass over running jobs, and reconciling the store with the backend.

export interface MonitorOptions {
  store: Transactional;
  env: JobEnvironment;
  backend: Backend;
  hooks: PluginHooks;
  updates: JobUpdates;
  access: JobAccess;
  now: () => number;
  requireCredits: boolean;
  /** Told of every charge in the transaction that records it. */
  mirror?: JobMirror;
}

/** Unsubmitted jobs adopted per pass: the submission queue holds them, not memory at large. */
const ADOPT_BATCH = 1000;

export type JobMonitor = ReturnType<typeof jobMonitor>;

export function jobMonitor(o: MonitorOptions) {
  const { store, backend, hooks, updates, access, now } = o;
  const charging = jobCharging({
    store,
    access,
    now,
    requireCredits: o.requireCredits,
    ...(o.mirror ? { mirror: o.mirror } : {}),
  });

  /**
   * Stops an active job's replicas and ends it with `outcome`, recorded first: whatever end the
   * backend reports meanwhile, and after a crash in between, the job ends this way.
   */
  async function endJob(id: string, outcome: Outcome, update: Omit<JobUpdate, 'timestamp'>): Promise<void> {
    await cancelThenEnd(id, await store.jobs.markEnding(id, outcome), update);
  }

  /** Cancels the job on the backend, then writes its end; `marked`: this call recorded the outcome. */
  async function cancelThenEnd(id: string, marked: boolean, update: Omit<JobUpdate, 'timestamp'>) {
    try {
      await backend.cancel(id);
    } catch (error) {
      if (marked) await store.jobs.unmarkEnding(id);
      throw error;
    }
    await updates.update(id, update);
  }

  /** Ends an active job as SUCCESS with `status` (cancelled, out of credits), as `outcome`. */
  async function stop(id: string, status: string, outcome: Outcome): Promise<void> {
    await endJob(id, outcome, { state: 'SUCCESS', status, expectedDifferentState: true });
  }

  /** What the lifecycle hooks may do: one object, made once. */
  const lifecycle: LifecycleContext = {
    config: o.env.config,
    now,
    expire: async (jobId) => {
      // Decided on the stored deadline, in the transaction that records the expiry (the row locked
      // on PostgreSQL): the caller's copy of the job may predate an extend, and an extend may
      // commit while this one waits. Once recorded, extends are refused and the job ends EXPIRED
      // whatever the backend reports of the cancel.
      const due = (job: JobRecord) =>
        job.state === 'RUNNING' && job.expiresAt !== null && job.expiresAt <= now();
      const ending = await store.transaction(async (tx) => {
        const job = await tx.jobs.get(jobId);
        if (!job || !due(job)) return undefined;
        return { marked: await tx.jobs.markEnding(jobId, { kind: 'EXPIRED' }) };
      });
      if (!ending) return;
      await cancelThenEnd(jobId, ending.marked, {
        state: 'EXPIRED',
        status: 'The job ran out of time',
        expectedState: 'RUNNING',
      });
    },
    charge: charging.charge,
    sshEndpoint: (jobId) => backend.sshEndpoint(jobId),
    addStatus: async (jobId, status) => {
      await updates.update(jobId, { status });
    },
    stopJobsOf: async (account, category, status) => {
      for (const record of await store.jobs.active()) {
        if (accountOf(ownerOf(record)) !== account) continue;
        if (record.specification.product.category !== category) continue;
        await stop(record.id, status, { kind: 'OUT_OF_CREDITS' });
      }
    },
  };

  /**
   * Each running job's annotations, by id, and the last pass that saw it running. A job's build is
   * written once, before its first submission, and removed at its end, never changed between: so
   * the monitoring pass parses each running job's build once, not every second (10,000 running jobs
   * parsed each second kept V8 from ever giving memory back). Dropped once a pass no longer sees it.
   */
  const annotationsOf = new Map<string, { annotations: Readonly<Record<string, string>>; pass: number }>();
  let passes = 0;

  /** A running job's annotations, from its build, kept; undefined if it has ended meanwhile. */
  async function readAnnotations(id: string) {
    const build = (await store.jobs.get(id))?.build;
    if (build === null || build === undefined) return undefined;
    const known = { annotations: buildAnnotations(build), pass: passes };
    annotationsOf.set(id, known);
    return known;
  }

  return {
    lifecycle,
    stop,

    /**
     * Queues (through `resubmit`) the queued jobs never handed to the backend: those other
     * replicas accepted, and those a crash left unsubmitted.
     */
    async adopt(resubmit: (id: string) => void): Promise<void> {
      for (const record of await store.jobs.unsubmitted(ADOPT_BATCH)) resubmit(record.id);
    },

    /**
     * One monitoring pass: running jobs, a page at a time (their rows without JSON, with their
     * annotations kept from their builds), through every plugin's onJobMonitoring; once the ends
     * the backend has seen are written (none is charged or expired past its end).
     */
    async monitor(): Promise<void> {
      await backend.caughtUp?.();
      const pass = ++passes;
      for await (const page of runningPages((after, limit) => store.jobs.runningRows(after, limit))) {
        const jobs: ActiveJob[] = [];
        for (const row of page) {
          const known = annotationsOf.get(row.id) ?? (await readAnnotations(row.id));
          if (!known) continue;
          known.pass = pass;
          jobs.push(asActiveJob(row, known.annotations));
        }
        await hooks.monitoring(lifecycle, jobs);
      }
      for (const [id, known] of annotationsOf) if (known.pass < pass) annotationsOf.delete(id);
    },

    /**
     * Reconciles the store with the backend: queues (through `resubmit`) what was never
     * submitted, fails what the backend has lost.
     */
    async recover(resubmit: (id: string) => void): Promise<void> {
      const known = await backend.knownJobs();
      for (const record of await store.jobs.active()) {
        if (!record.submitted) resubmit(record.id);
        else if (!known.has(record.id)) {
          await updates.update(record.id, { state: 'FAILURE', status: 'ucompute lost track of this job' });
        }
      }
    },
  };
}
