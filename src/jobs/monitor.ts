import type { JobUpdate } from '../model/job.ts';
import type { Outcome } from '../model/outcome.ts';
import { accountOf } from '../model/owner.ts';
import type { LifecycleContext } from '../plugins/plugin.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import { type JobAccess, ownerOf } from './access.ts';
import type { Backend } from './backend.ts';
import { jobCharging } from './charging.ts';
import type { PluginHooks } from './job-management.ts';
import type { JobMirror } from './mirror.ts';
import type { JobEnvironment } from './prepare.ts';
import { RUNNING_PAGE } from './running-pages.ts';
import { runningSet } from './running-set.ts';
import type { JobUpdates } from './updates.ts';

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

  const running = runningSet({ store, now, dueAt: (job) => hooks.monitoringDueAt(lifecycle, job) });

  return {
    lifecycle,
    stop,

    /**
     * Queues (through `resubmit`) the queued jobs never handed to the backend: those other
     * replicas accepted, and those a crash left unsubmitted.
     */
    async adopt(resubmit: (id: string) => void): Promise<void> {
      for (const id of await store.jobs.unsubmitted(ADOPT_BATCH)) resubmit(id);
    },

    /**
     * One monitoring pass: the running jobs a plugin has something to do for now (a charge due, a
     * deadline passed), a page at a time through every plugin's onJobMonitoring, then read again;
     * once the ends the backend has seen are written (none is charged or expired past its end).
     */
    async monitor(): Promise<void> {
      await backend.caughtUp?.();
      await running.sync();
      const due = running.due();
      for (let i = 0; i < due.length; i += RUNNING_PAGE) {
        const jobs = due.slice(i, i + RUNNING_PAGE);
        await hooks.monitoring(lifecycle, jobs);
        await running.reread(jobs.map((j) => j.id));
      }
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
