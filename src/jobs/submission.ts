import type { Clock } from '../model/clock.ts';
import { isFinal } from '../model/job-states.ts';
import type { JobBuild, PeerLocation, PreparedJob } from '../plugins/plugin.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import type { Transactional } from '../store/store.ts';
import { ownerNamespace } from '../volcano/names.ts';
import { ownerOf } from './access.ts';
import type { Backend } from './backend.ts';
import { isDiskFull } from './errors.ts';
import type { PluginHooks } from './job-management.ts';
import type { Logger } from './log.ts';
import { creatorDrives, type JobEnvironment, prepareJob } from './prepare.ts';
import { heldStatus, type QuotaProblemOf } from './quota-hold.ts';
import { sshKeys } from './ssh-keys.ts';
import type { JobUpdates } from './updates.ts';

// Submission: accepted jobs are built once (every plugin's onCreate) and handed to the backend, a
// few at a time, trying again with backoff when the backend refuses for a moment. A job whose
// owner is over its storage quota is held instead (quota-hold.ts).

export interface SubmissionOptions {
  store: Transactional;
  env: JobEnvironment;
  backend: Backend;
  hooks: PluginHooks;
  updates: JobUpdates;
  storage?: JobStorage;
  log?: Logger;
  /** First wait before submitting again to a backend that refused; it doubles each time. */
  retryMs: number;
  /** What the waits before trying again count on. */
  clock: Clock;
  /** Why a job's owner may not start jobs now (over its storage quota): the job is held. */
  quotaProblem?: QuotaProblemOf;
}

const SUBMIT_CONCURRENCY = 16;
const SUBMIT_ATTEMPTS = 5;
/** Wait before submitting again a job whose submission could not be written (a full disk). */
const DISK_FULL_RETRY_MS = 1000;
/**
 * Jobs validated at creation and not yet built, so submission need not validate them again;
 * bounded, so that a backlog of accepted jobs does not live in memory (they are in the store).
 */
const PREPARED_LIMIT = 1000;

export function jobSubmission(o: SubmissionOptions) {
  const { store, env, backend, hooks, updates, log } = o;
  // A FIFO with a moving head: shift() on a long backlog would copy it every time.
  let queue: string[] = [];
  let head = 0;
  const prepared = new Map<string, PreparedJob>();
  const failures = new Map<string, number>();
  const keys = sshKeys(store);
  let submitting = 0;
  let stopped = false;

  /**
   * Jobs queued, being submitted or waiting to be tried again: a job is queued once however often
   * it is asked for (a leader adopts every unsubmitted job on each pass, its own among them).
   */
  const pending = new Set<string>();

  function enqueue(id: string): void {
    if (pending.has(id)) return;
    pending.add(id);
    push(id);
  }

  function push(id: string): void {
    queue.push(id);
    pump();
  }

  function pump(): void {
    while (submitting < SUBMIT_CONCURRENCY && head < queue.length) {
      const id = queue[head++]!;
      if (head === queue.length) {
        queue = [];
        head = 0;
      }
      submitting++;
      submit(id)
        .then(
          (again) => {
            if (!again) pending.delete(id);
          },
          (e: unknown) => {
            log?.error({ err: e, jobId: id }, 'submission failed');
            // Nothing of it was written: once there is space again, it is submitted after all.
            if (isDiskFull(e) && !stopped) o.clock.setTimeout(() => push(id), DISK_FULL_RETRY_MS);
            else pending.delete(id);
          },
        )
        .finally(() => {
          submitting--;
          pump();
        });
    }
  }

  async function peerLocations(job: PreparedJob): Promise<Map<string, PeerLocation>> {
    const peers = new Map<string, PeerLocation>();
    for (const peer of job.parameters.peers) {
      const record = await store.jobs.get(peer.jobId);
      if (record) peers.set(peer.jobId, { namespace: ownerNamespace(env.config, ownerOf(record)) });
    }
    return peers;
  }

  /**
   * Builds (once) and submits a stored job; the backend makes a repeated submit harmless. Answers
   * whether it is tried again later (the backend refused for a moment).
   */
  async function submit(id: string): Promise<boolean> {
    const record = await store.jobs.get(id);
    // A suspended job waits for unsuspend, also when a restart's recovery queues it.
    if (!record || isFinal(record.state) || record.state === 'SUSPENDED' || record.submitted) return false;
    const problem = await o.quotaProblem?.(record).catch((err: unknown) => {
      log?.error({ err, jobId: id }, 'could not measure the drive of a job’s owner; submitting it');
      return undefined;
    });
    if (problem !== undefined) {
      await updates.update(id, {
        state: 'SUSPENDED',
        status: heldStatus(problem),
        expectedState: 'IN_QUEUE',
      });
      return false;
    }
    let build: JobBuild;
    if (record.build === null) {
      let job = prepared.get(id);
      prepared.delete(id);
      try {
        job ??= prepareJob(
          record.specification,
          {
            id,
            owner: ownerOf(record),
            createdAt: record.createdAt,
            drives: await creatorDrives(store.users, record.createdBy),
          },
          env,
        );
      } catch (e) {
        await updates.update(id, {
          state: 'FAILURE',
          status: `The job can no longer be started: ${(e as Error).message}`,
        });
        return false;
      }
      const created = await hooks.create(job, {
        config: env.config,
        peers: await peerLocations(job),
        ...(o.storage ? { storage: o.storage } : {}),
        ...(job.sshEnabled ? { authorizedKeys: await keys.authorizedKeys(record.createdBy) } : {}),
      });
      if ('failure' in created) {
        await updates.update(id, {
          state: 'FAILURE',
          status: `The job could not be created: ${created.failure}`,
        });
        return false;
      }
      build = created.build;
      // The build and the output folder it reports are written together, or not at all when the
      // job ended meanwhile.
      const saved = await updates.update(
        id,
        {
          ...(build.outputFolder !== undefined ? { outputFolder: build.outputFolder } : {}),
          expectedState: 'IN_QUEUE',
        },
        { build: JSON.stringify(build) },
      );
      if (!saved) return false;
    } else {
      build = JSON.parse(record.build) as JobBuild;
    }
    try {
      await backend.submit(id, build);
      failures.delete(id);
      const state = (await store.jobs.markSubmitted(id))!;
      // Suspended while the submission was under way: the backend must not run it, and
      // unsuspend submits it again (it was not marked submitted).
      if (state === 'SUSPENDED') {
        await backend.suspend(id);
        return false;
      }
      // Cancelled while the submission was under way: the backend must not keep it.
      if (isFinal(state)) await backend.cancel(id);
    } catch (e) {
      // A backend can refuse for a moment (an API server restarting): try again, waiting longer
      // each time, before the job fails. The job stays queued and durable meanwhile.
      const failed = (failures.get(id) ?? 0) + 1;
      if (failed < SUBMIT_ATTEMPTS && !stopped) {
        failures.set(id, failed);
        log?.warn({ err: e, jobId: id, attempt: failed }, 'the backend refused a job; trying again');
        o.clock.setTimeout(() => push(id), o.retryMs * 2 ** (failed - 1));
        return true;
      }
      failures.delete(id);
      await updates.update(id, {
        state: 'FAILURE',
        status: `The backend refused the job: ${(e as Error).message}`,
      });
    }
    return false;
  }

  return {
    /** Queues a stored job for submission. */
    enqueue,

    /** Queues jobs just accepted, keeping (a bounded number of) them prepared. */
    accept(jobs: readonly PreparedJob[]): void {
      for (const job of jobs) if (prepared.size < PREPARED_LIMIT) prepared.set(job.id, job);
      for (const job of jobs) enqueue(job.id);
    },

    /** A refused submission is not tried again from now on. */
    stop(): void {
      stopped = true;
    },
  };
}
