import { createHash } from 'node:crypto';
import { IssueList, ValidationError } from '../model/errors.ts';
import { newJobId } from '../model/ids.ts';
import { isFinal } from '../model/job-states.ts';
import { type Owner, ownerDrive } from '../model/owner.ts';
import type { PreparedJob } from '../plugins/plugin.ts';
import type { InputStorage } from '../storage/job-storage.ts';
import { QuotaExceeded, type StorageQuotas } from '../storage/quota.ts';
import type { NewJob } from '../store/jobs.ts';
import type { Store } from '../store/store.ts';
import type { Caller, JobAccess } from './access.ts';
import type { LargestMachine } from './backend.ts';
import { type CreditReads, creditCheck } from './credit-check.ts';
import { conflict, forbidden, paymentRequired } from './errors.ts';
import { checkFits, checkInputs, creatorDrives, type JobEnvironment, prepareJob } from './prepare.ts';

// Intake: a request's jobs checked whole, then made durable together with other requests' in one
// transaction, once per Idempotency-Key, each holding back the credits it can spend before its
// first charge (credit-check.ts).

export interface CreateOptions {
  project?: string;
  idempotencyKey?: string;
}

/** What intake asks of the storage quotas: whether the owner of a drive is over its quota. */
export type QuotaCheck = Pick<StorageQuotas, 'check'>;

export interface IntakeOptions {
  store: Store;
  env: JobEnvironment;
  access: JobAccess;
  now: () => number;
  /** Refuse (402) priced jobs whose owner cannot pay for them until their first charge. */
  requireCredits: boolean;
  /** How often running jobs are charged: a job's reservation covers what it spends in between. */
  monitorIntervalMs: number;
  /** The backend's largest machine, read at each request (it may change, e.g. as nodes join). */
  largestMachine: () => LargestMachine | null;
  /** Where input files and folders are checked at submit; without it they are not. */
  storage?: InputStorage;
  /** An owner at or over its storage quota gets 402, as UCloud refuses jobs of a locked drive. */
  quotas?: QuotaCheck;
  /** Called with the jobs made durable, in order, once per job. */
  accepted: (jobs: PreparedJob[]) => void;
}

const MAX_ITEMS = 1000;

interface Pending {
  records: { prepared: PreparedJob }[];
  username: string;
  idempotency?: { key: string; hash: string };
  resolve: (ids: string[]) => void;
  reject: (e: unknown) => void;
}

/** A validated job as it is inserted, IN_QUEUE, holding back `reservedCredits`. */
export function newJobOf(prepared: PreparedJob, reservedCredits = 0): NewJob {
  return {
    id: prepared.id,
    createdBy: prepared.owner.createdBy,
    project: prepared.owner.project ?? null,
    application: prepared.application.metadata.name,
    createdAt: prepared.createdAt,
    specification: prepared.specification,
    timeAllocationMs: prepared.timeAllocationMillis,
    pricePerUnit: prepared.product.pricePerUnit,
    reservedCredits,
    firstUpdate: { timestamp: prepared.createdAt, state: 'IN_QUEUE', status: 'The job is in the queue' },
  };
}

export function jobIntake(o: IntakeOptions) {
  const { store, env, access, now } = o;
  const credits = o.requireCredits
    ? creditCheck({
        access,
        now,
        monitorIntervalMs: o.monitorIntervalMs,
        chargePeriodMs: env.config.chargePeriodMs,
      })
    : undefined;
  let batch: Pending[] = [];
  /** The flush under way: one at a time, so that requests arriving meanwhile share the next. */
  let flushing: Promise<void> | undefined;

  /**
   * Commits the pending requests, then those that came meanwhile, one transaction at a time:
   * concurrent transactions of one owner would only wait for each other's lock on its credits.
   */
  function startFlushing(): void {
    flushing ??= (async () => {
      try {
        while (batch.length > 0) await flush();
      } finally {
        flushing = undefined;
      }
    })();
  }

  /** Commits every pending request in one transaction: one disk sync for many submissions. */
  async function flush(): Promise<void> {
    const pending = batch;
    batch = [];
    // Answers the requests whose jobs it inserted; the others repeat a key committed first.
    const commit = (group: Pending[]) =>
      store.transaction(
        async (tx) => {
          const fresh = new Set<Pending>();
          const reads: CreditReads = new Map();
          // The batch's credits first, all at once: on PostgreSQL they go with the begin, and the
          // jobs with the commit (2 round trips for the flush when no request has an Idempotency-Key).
          await credits?.read(
            tx,
            group.flatMap((p) => p.records.map((r) => r.prepared)),
            reads,
          );
          const jobs: NewJob[] = [];
          for (const p of group) {
            if (p.idempotency && (await tx.jobs.idempotent(p.username, p.idempotency.key))) continue;
            fresh.add(p);
            const prepared = p.records.map((r) => r.prepared);
            const reserved = await credits?.reserve(tx, prepared, reads);
            for (const job of prepared) jobs.push(newJobOf(job, reserved?.get(job.id)));
            if (p.idempotency) {
              await tx.jobs.rememberIdempotent(
                p.username,
                p.idempotency.key,
                p.idempotency.hash,
                p.records.map((r) => r.prepared.id),
              );
            }
          }
          await tx.jobs.insert(jobs);
          return fresh;
        },
        { durable: true },
      );
    // Answers the jobs to submit: a repeat gets the first request's ids (409 for another body) and
    // submits nothing, or the job would be submitted twice.
    const settle = async (p: Pending, fresh: ReadonlySet<Pending>): Promise<PreparedJob[]> => {
      const seen =
        !fresh.has(p) && p.idempotency && (await store.jobs.idempotent(p.username, p.idempotency.key));
      if (!seen) {
        p.resolve(p.records.map((r) => r.prepared.id));
        return p.records.map((r) => r.prepared);
      }
      if (seen.requestHash === p.idempotency?.hash) p.resolve(seen.jobIds);
      else p.reject(conflict('this Idempotency-Key was used for a different request'));
      return [];
    };
    let fresh: ReadonlySet<Pending>;
    try {
      fresh = await commit(pending);
    } catch {
      // One bad request must not fail the others: commit them one by one.
      for (const p of pending) {
        try {
          o.accepted(await settle(p, await commit([p])));
        } catch (e) {
          p.reject(e);
        }
      }
      return;
    }
    try {
      const accepted: PreparedJob[] = [];
      for (const p of pending) accepted.push(...(await settle(p, fresh)));
      o.accepted(accepted);
    } catch (e) {
      // Requests answered already keep their answer (a promise settles once).
      for (const p of pending) p.reject(e);
    }
  }

  async function create(caller: Caller, items: unknown, opts: CreateOptions = {}): Promise<string[]> {
    if (!Array.isArray(items) || items.length === 0 || items.length > MAX_ITEMS) {
      throw new ValidationError([
        { path: 'items', message: `must be a list of 1 to ${MAX_ITEMS} job specifications` },
      ]);
    }
    if (opts.project !== undefined) {
      const memberships = await store.users.memberships(caller.username);
      const member = memberships.some((m) => m.projectId === opts.project);
      if (!member && !(caller.admin && (await store.users.projectExists(opts.project)))) {
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
      const seen = await store.jobs.idempotent(caller.username, opts.idempotencyKey);
      if (seen) {
        if (seen.requestHash !== hash)
          throw conflict('this Idempotency-Key was used for a different request');
        return seen.jobIds;
      }
      idempotency = { key: opts.idempotencyKey, hash };
    }

    const createdAt = now();
    const drives = await creatorDrives(store.users, caller.username);
    const issues = new IssueList();
    const records: Pending['records'] = [];
    const machine = o.largestMachine();
    items.forEach((item, i) => {
      try {
        const prepared = prepareJob(item, { id: newJobId(createdAt), owner, createdAt, drives }, env);
        const fits = new IssueList();
        checkFits(prepared, machine, fits);
        fits.throwIfAny();
        records.push({ prepared });
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        issues.addAll(e.issues.map((issue) => ({ ...issue, path: `items[${i}].${issue.path}` })));
      }
    });
    const storage = o.storage;
    if (storage) {
      await Promise.all(
        records.map(async ({ prepared }, i) => {
          const found = new IssueList();
          await checkInputs(prepared, storage, found);
          issues.addAll(found.issues.map((issue) => ({ ...issue, path: `items[${i}].${issue.path}` })));
        }),
      );
    }
    // A peer opens a network path both ways: it must be a job the caller may act on, still active.
    for (const [i, { prepared }] of records.entries()) {
      for (const peer of prepared.parameters.peers) {
        const job = await store.jobs.get(peer.jobId);
        const path = `items[${i}].specification`;
        if (!job || !(await access.canSee(caller, job))) {
          issues.add(path, `peer ${peer.hostname} names no job of yours (${peer.jobId})`);
        } else if (isFinal(job.state)) {
          issues.add(path, `peer ${peer.hostname} names a job that has ended (${peer.jobId})`);
        }
      }
    }
    issues.throwIfAny();
    await o.quotas?.check(ownerDrive(owner)).catch((e: unknown) => {
      throw e instanceof QuotaExceeded ? paymentRequired(`the job cannot start: ${e.message}`) : e;
    });

    return new Promise<string[]>((resolve, reject) => {
      // A millisecond of patience lets concurrent requests share one sync to disk.
      if (batch.length === 0 && !flushing) setTimeout(startFlushing, 1);
      batch.push({
        records,
        username: caller.username,
        ...(idempotency ? { idempotency } : {}),
        resolve,
        reject,
      });
    });
  }

  return { create };
}
