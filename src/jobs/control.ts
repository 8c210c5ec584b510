import type { SimpleDuration } from '../model/application.ts';
import { durationMillis } from '../model/application.ts';
import { JOB_NAME_PATTERN, type JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import type { Caller, JobAccess } from './access.ts';
import type { Backend } from './backend.ts';
import { badRequest, conflict, paymentRequired } from './errors.ts';
import type { PluginHooks } from './job-management.ts';
import { decideUpdate } from './lifecycle.ts';
import type { JobMirror } from './mirror.ts';
import type { JobMonitor } from './monitor.ts';
import { findProduct, type JobEnvironment, maxTimeAllocationMillis } from './prepare.ts';
import { heldStatus, type QuotaProblemOf, RELEASED_STATUS } from './quota-hold.ts';
import { activeJob, type JobUpdates } from './updates.ts';

// What callers change on their jobs after creation: cancel, suspend and resume them, give them
// more time, rename them.

export interface ExtendItem {
  jobId: string;
  requestedTime: SimpleDuration;
}

export interface ControlOptions {
  store: Transactional;
  env: JobEnvironment;
  backend: Backend;
  access: JobAccess;
  updates: JobUpdates;
  monitor: JobMonitor;
  hooks: PluginHooks;
  /** Queues a stored job for submission (its stored build, when it has one). */
  resubmit: (id: string) => void;
  now: () => number;
  /** Told of every update written here, in its transaction. */
  mirror?: JobMirror;
  /** Why the job's owner may not start jobs now (over its storage quota); without it, no limit. */
  quotaProblem?: QuotaProblemOf;
}

export interface RenameItem {
  id: string;
  newTitle: string;
}

export function jobControl(o: ControlOptions) {
  const { store, env, backend, access, updates, now } = o;

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

  /** The jobs if the caller may see every one; otherwise 404 for the first that is not. */
  async function visibleJobs(caller: Caller, ids: readonly string[]): Promise<JobRecord[]> {
    const jobs: JobRecord[] = [];
    for (const id of ids) jobs.push(await access.visibleJob(caller, id));
    return jobs;
  }

  /**
   * The backend stops the job's replicas and forgets it; the job, its build and its folder stay.
   * Charging and the clock stop with it.
   */
  async function suspendJob(id: string, status: string): Promise<void> {
    await backend.suspend(id);
    // Charged up to now before the job is stored as suspended: a crash in between leaves a
    // running job, whose later end charges only the periods this charge did not cover.
    const running = await store.jobs.get(id);
    const active = running?.state === 'RUNNING' ? activeJob(running) : undefined;
    if (active) await o.hooks.suspend(o.monitor.lifecycle, active);
    await updates.update(id, { state: 'SUSPENDED', status }, { submitted: false });
  }

  /** A person's suspend, in the job's updates: who, and that it waits for a resume. */
  const suspendedStatus = (username: string) =>
    `Suspended by ${username}: its processes are stopped; the job and its folder are kept until it is resumed`;

  /** Puts a suspended job back in the queue and submits it again. */
  async function requeue(id: string, status: string): Promise<void> {
    const queued = await updates.update(id, { state: 'IN_QUEUE', status, expectedState: 'SUSPENDED' });
    if (queued) o.resubmit(id);
  }

  return {
    /** Ends the jobs; one that has already ended is left as it is (UCloud's core2 answers it 200). */
    async terminate(caller: Caller, ids: readonly string[]): Promise<void> {
      const jobs = await visibleJobs(caller, ids);
      for (const job of jobs) {
        if (isFinal(job.state)) continue;
        await o.monitor.stop(job.id, 'The job was cancelled', { kind: 'CANCELLED', by: caller.username });
      }
    },

    /**
     * UCloud's suspend: the backend stops the job's replicas and frees their resources; the job,
     * its build and its folder stay, and unsuspend runs the same job again. Only queued and
     * running jobs can be suspended; charging and the clock stop with them.
     */
    async suspend(caller: Caller, ids: readonly string[]): Promise<void> {
      const jobs = await visibleJobs(caller, ids);
      for (const job of jobs) {
        if (job.state !== 'RUNNING' && job.state !== 'IN_QUEUE')
          throw conflict(`job ${job.id} is ${job.state}; only queued or running jobs can be suspended`);
      }
      for (const job of jobs) await suspendJob(job.id, suspendedStatus(caller.username));
    },

    /**
     * Queues suspended jobs again, with the build they had: the same job, folder and outputs. An
     * owner over its storage quota gets 402, as at submit.
     */
    async unsuspend(caller: Caller, ids: readonly string[]): Promise<void> {
      const jobs = await visibleJobs(caller, ids);
      for (const job of jobs) {
        if (job.state !== 'SUSPENDED') throw conflict(`job ${job.id} is ${job.state}, not SUSPENDED`);
        const problem = await o.quotaProblem?.(job);
        if (problem !== undefined) throw paymentRequired(`job ${job.id} cannot start: ${problem}`);
      }
      for (const job of jobs)
        await requeue(job.id, `Resumed by ${caller.username}: the job is in the queue again`);
    },

    /**
     * Holds a job that has not started while its owner is over its storage quota (see
     * quota-hold.ts): out of the backend's queue, SUSPENDED with the reason. A job that started
     * meanwhile is suspended as a person's suspend would, and runs again once released.
     */
    async holdForQuota(id: string, problem: string): Promise<void> {
      if ((await store.jobs.state(id)) !== 'IN_QUEUE') return;
      await suspendJob(id, heldStatus(problem));
    },

    /** Queues again a job held for its owner's quota, once the owner has room. */
    async releaseFromQuota(id: string): Promise<void> {
      await requeue(id, RELEASED_STATUS);
    },

    /** UCloud's rename: a new name (as a job's name is checked), or none with an empty title. */
    async rename(caller: Caller, items: readonly RenameItem[]): Promise<void> {
      const jobs = await visibleJobs(
        caller,
        items.map((item) => item.id),
      );
      items.forEach((item, i) => {
        if (
          item.newTitle.length > 200 ||
          (item.newTitle !== '' && !new RegExp(JOB_NAME_PATTERN).test(item.newTitle))
        )
          throw badRequest(`items[${i}].newTitle: must be at most 200 letters, digits, spaces and ():_-`);
      });
      await store.transaction(async (tx) => {
        for (const [i, item] of items.entries()) {
          await tx.jobs.rename(jobs[i]!.id, item.newTitle === '' ? null : item.newTitle);
        }
      });
    },

    async extend(caller: Caller, items: readonly ExtendItem[]): Promise<void> {
      // The request's time, as it arrived: what it is checked against even if the store answers
      // after the deadline has come.
      const at = now();
      const jobs = await visibleJobs(
        caller,
        items.map((item) => item.jobId),
      );
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
        await store.transaction(async (tx) => {
          const job = (await tx.jobs.get(item.jobId))!;
          // Checked again on the stored allocation: concurrent extends add up.
          beyondMaximum(job, (job.timeAllocationMs ?? 0) + added, i);
          if (isFinal(job.state)) {
            ended = `job ${job.id} has already ended`;
            return;
          }
          // Being ended by ucompute (cancelled, out of credits, expired): its end is decided.
          if (job.outcome !== null) {
            ended = `job ${job.id} is being ended`;
            return;
          }
          // Past its deadline the job is being expired (the monitor may be cancelling it right
          // now): an extend accepted here would be lost, so it is refused.
          if (job.state === 'RUNNING' && job.expiresAt !== null && job.expiresAt <= at) {
            ended = `job ${job.id} ran out of time`;
            return;
          }
          const u: JobUpdate = { timestamp: at, newTimeAllocation: (job.timeAllocationMs ?? 0) + added };
          const decision = decideUpdate(job, u);
          if (decision.kind !== 'apply') return;
          await tx.jobs.appendUpdate(job, u, decision.changes);
          await o.mirror?.updateWritten(tx, job.id, u);
          expiresAt = decision.changes.expiresAt ?? null;
        });
        if (ended !== undefined) throw conflict(ended);
        if (expiresAt !== null) await backend.extend(item.jobId, expiresAt);
      }
    },
  };
}
