import type { Clock } from '../model/clock.ts';
import type { JobState } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { JobBuild, PeerLocation, PreparedJob } from '../plugins/plugin.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import type { JobRecord, SubmissionState } from '../store/jobs.ts';
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

/**
 * Jobs submitted together, one step at a time for all (read, built, saved, handed to the backend,
 * marked submitted: each step a statement or transaction for the whole batch), and batches under
 * way at once: jobs queued while one is under way go together in the next.
 */
const SUBMIT_BATCH = 64;
const SUBMIT_BATCHES = 2;
const SUBMIT_ATTEMPTS = 5;
/** Wait before submitting again a job whose submission could not be written (a full disk). */
const DISK_FULL_RETRY_MS = 1000;
/**
 * Jobs validated at creation and not yet built, so submission need not validate them again;
 * bounded, so that a backlog of accepted jobs does not live in memory (they are in the store).
 */
const PREPARED_LIMIT = 1000;

/**
 * Whether a job may still be handed to the backend: neither ended nor handed over already; a
 * suspended job waits for unsuspend, also when a restart's recovery queues it.
 */
function submittable(job: SubmissionState): boolean {
  return !isFinal(job.state) && job.state !== 'SUSPENDED' && !job.submitted;
}

/** What became of a job in a batch: done with, tried again later, or ready for the backend. */
type Step = 'done' | 'again' | { build: JobBuild };

export function jobSubmission(o: SubmissionOptions) {
  const { store, env, backend, hooks, updates, log } = o;
  // A FIFO with a moving head: shift() on a long backlog would copy it every time.
  let queue: string[] = [];
  let head = 0;
  const prepared = new Map<string, PreparedJob>();
  const failures = new Map<string, number>();
  const keys = sshKeys(store);
  let batches = 0;
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
    while (batches < SUBMIT_BATCHES && head < queue.length) {
      const batch = queue.slice(head, head + SUBMIT_BATCH);
      head += batch.length;
      if (head === queue.length) {
        queue = [];
        head = 0;
      }
      batches++;
      submitBatch(batch)
        .then(
          (again) => {
            for (const id of batch) if (!again.has(id)) pending.delete(id);
          },
          (e: unknown) => {
            log?.error({ err: e, jobIds: batch }, 'submission failed');
            // Nothing of it was written: once there is space again, it is submitted after all.
            const retry = isDiskFull(e) && !stopped;
            if (retry) o.clock.setTimeout(() => batch.forEach(push), DISK_FULL_RETRY_MS);
            else for (const id of batch) pending.delete(id);
          },
        )
        .finally(() => {
          batches--;
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
   * Builds (once) and submits stored jobs; the backend makes a repeated submit harmless. Answers
   * those tried again later (the backend refused for a moment).
   */
  async function submitBatch(ids: readonly string[]): Promise<Set<string>> {
    const records = await store.jobs.getMany(ids);
    // Jobs built before (a restart, an unsuspend, a leader stopped midway) are handed over as built.
    const builds = await store.jobs.builds(
      ids.filter((id) => (records.get(id)?.annotations ?? null) !== null),
    );
    const steps = await Promise.all(
      ids.map((id) =>
        prepareStep(id, records.get(id), builds.get(id)).catch((e: unknown): Step => {
          log?.error({ err: e, jobId: id }, 'submission failed');
          // Nothing of it was written: once there is space again, it is submitted after all.
          if (!isDiskFull(e) || stopped) return 'done';
          o.clock.setTimeout(() => push(id), DISK_FULL_RETRY_MS);
          return 'again';
        }),
      ),
    );
    // The builds made here saved together (with the output folders they report), or not at all
    // for a job that ended meanwhile; once saved, the jobs' acceptance is on disk too (the backend
    // must never run a job that a crash of the database would lose).
    const toSave = ids.flatMap((id, i) => {
      const step = steps[i]!;
      return typeof step === 'object' && records.get(id)?.annotations === null
        ? [{ id, build: step.build }]
        : [];
    });
    const saved = await updates.updateMany(
      toSave.map(({ id, build }) => ({
        id,
        update: {
          ...(build.outputFolder !== undefined ? { outputFolder: build.outputFolder } : {}),
          expectedState: 'IN_QUEUE' as const,
        },
        extra: {
          build: { json: JSON.stringify(build), annotations: { ...build.volcanoJob.metadata.annotations } },
        },
      })),
      { afterDurable: true },
    );
    toSave.forEach(({ id }, i) => {
      if (!saved[i]) steps[ids.indexOf(id)] = 'done';
    });
    // A job built before (by a leader stopped before it marked the job submitted, or for a restart
    // or an unsuspend) has waited here for the others of its batch with nothing guarding it: the
    // backend may have run it to its end meanwhile, and the end once written removed its objects.
    // Read again just before the backend gets it, so that such a job is not made a second time.
    const built = ids.filter(
      (id, i) => typeof steps[i] === 'object' && records.get(id)?.annotations !== null,
    );
    if (built.length > 0) {
      const current = await store.jobs.submissionStates(built);
      for (const id of built) {
        const s = current.get(id);
        if (s && submittable(s)) continue;
        steps[ids.indexOf(id)] = 'done';
        failures.delete(id);
      }
    }
    const ready = ids.flatMap((id, i) => {
      const step = steps[i]!;
      return typeof step === 'object' ? [{ id, build: step.build }] : [];
    });
    const submitted = await Promise.all(
      ready.map(({ id, build }) =>
        backend.submit(id, build).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    const again = new Set(ids.filter((_, i) => steps[i] === 'again'));
    const ok = ready.filter((_, i) => submitted[i] === undefined).map((r) => r.id);
    let states: Map<string, JobState>;
    try {
      states = await store.jobs.markSubmitted(ok);
    } catch (e) {
      for (const id of ok) if (await refused(id, e)) again.add(id);
      states = new Map();
    }
    for (const id of ok) {
      failures.delete(id);
      const state = states.get(id);
      // Suspended while the submission was under way: the backend must not run it, and
      // unsuspend submits it again (it was not marked submitted).
      if (state === 'SUSPENDED') await backend.suspend(id);
      // Cancelled while the submission was under way: the backend must not keep it.
      else if (state !== undefined && isFinal(state)) await backend.cancel(id);
    }
    for (const [i, { id }] of ready.entries()) {
      if (submitted[i] !== undefined && (await refused(id, submitted[i]))) again.add(id);
    }
    return again;
  }

  /**
   * A backend can refuse for a moment (an API server restarting): the job is tried again, waiting
   * longer each time, before it fails (answers false). It stays queued and durable meanwhile.
   */
  async function refused(id: string, e: unknown): Promise<boolean> {
    const failed = (failures.get(id) ?? 0) + 1;
    if (failed < SUBMIT_ATTEMPTS && !stopped) {
      failures.set(id, failed);
      log?.warn({ err: e, jobId: id, attempt: failed }, 'the backend refused a job; trying again');
      o.clock.setTimeout(() => push(id), o.retryMs * 2 ** (failed - 1));
      return true;
    }
    failures.delete(id);
    // Stopped (this replica no longer leads, or shuts down): what the backend refused meanwhile is
    // not the job's failure; it stays queued, unsubmitted, and the next leader adopts it.
    if (stopped) {
      log?.info(
        { err: e, jobId: id },
        'the backend refused a job after this replica stopped leading; left queued',
      );
      return false;
    }
    await updates.update(id, {
      state: 'FAILURE',
      status: `The backend refused the job: ${(e as Error).message}`,
    });
    return false;
  }

  /**
   * A job of a batch held, failed, or built (once: a job submitted again has its build, `saved`;
   * gone since its row was read, the job has ended).
   */
  async function prepareStep(
    id: string,
    record: JobRecord | undefined,
    saved: string | undefined,
  ): Promise<Step> {
    if (!record || !submittable(record)) return 'done';
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
      return 'done';
    }
    if (record.annotations !== null)
      return saved === undefined ? 'done' : { build: JSON.parse(saved) as JobBuild };
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
      return 'done';
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
      return 'done';
    }
    return { build: created.build };
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
