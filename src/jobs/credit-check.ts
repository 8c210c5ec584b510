import { chargeBasisOf, credits } from '../accounting/charges.ts';
import type { Owner } from '../model/owner.ts';
import { accountOf } from '../model/owner.ts';
import type { Product } from '../model/product.ts';
import type { PreparedJob } from '../plugins/plugin.ts';
import { creditKey } from '../store/accounting.ts';
import type { StoreParts } from '../store/store.ts';
import { type JobAccess, type Wallet, walletOf } from './access.ts';
import { paymentRequired } from './errors.ts';

// Credit reservations at intake: a priced job is accepted only when its owner's balance, less what
// its active jobs hold back, covers what the job can spend before its first charge; it then holds
// that back itself. Checked in the transaction that accepts the jobs and inserted with them, so
// requests made at once are counted one after the other and cannot overdraw together.

/**
 * What a job of `product` on `replicas` can spend between two charges: the charge periods one
 * monitoring interval can cross (charges are made by the monitoring passes), at least one.
 */
export function reservationFor(
  product: Product,
  replicas: number,
  monitorIntervalMs: number,
  chargePeriodMs: number | null,
): number {
  const basis = chargeBasisOf(product, replicas, chargePeriodMs);
  return credits(basis, Math.max(1, Math.ceil(monitorIntervalMs / basis.periodMs)));
}

/** Why an owner may not start a job in a category, naming the workspace, its allocation and who can help. */
export function noCredits(owner: Owner, w: Wallet, held = 0, needed = 0): string {
  const who = owner.project !== undefined ? `project ${owner.project}` : `user ${owner.createdBy}`;
  const help =
    owner.project !== undefined
      ? "ask the project's PI or an administrator for a grant"
      : 'run in a project that has credits (--project, or the workspace in the web header), or ask an administrator for a grant';
  if (w.allocated === 0) return `${who} has no allocation for ${w.category}: ${help}`;
  if (w.balance > 0) {
    const holding = held > 0 ? `, of which its active jobs hold ${held} until their next charge,` : '';
    const wait = held > 0 ? 'wait for a job to end, or ' : '';
    return `${who} has ${w.balance} credits left for ${w.category}${holding} and this job needs ${needed} (allocated ${w.allocated}, used ${w.used}): ${wait}${help}`;
  }
  return `${who} has no credits left for ${w.category} (allocated ${w.allocated}, used ${w.used}): ${help}`;
}

export interface CreditCheckOptions {
  access: JobAccess;
  now: () => number;
  monitorIntervalMs: number;
  /** accounting.chargePeriodMs; null: each product's own period. */
  chargePeriodMs: number | null;
}

/**
 * What a transaction has read of an owner's credits in a category: the wallet (its allocations
 * locked for the rest of the transaction on PostgreSQL) and what its active jobs hold back, grown
 * by each job reserved since. One per transaction: a batch of submissions reads each owner's once.
 */
export type CreditReads = Map<string, { wallet: Wallet; held: number }>;

export function creditCheck(o: CreditCheckOptions) {
  /**
   * Reads into `reads` the credits of every owner and category of `jobs`' priced jobs that it
   * does not hold yet: all in one call (on PostgreSQL one round trip, with the transaction's begin
   * when it is its first statement).
   */
  async function read(tx: StoreParts, jobs: readonly PreparedJob[], reads: CreditReads): Promise<void> {
    const pairs = new Map<string, { owner: string; category: string }>();
    for (const job of jobs) {
      if (job.product.pricePerUnit === 0) continue;
      const owner = accountOf(job.owner);
      const key = creditKey(owner, job.product.category);
      if (!reads.has(key)) pairs.set(key, { owner, category: job.product.category });
    }
    if (pairs.size === 0) return;
    const found = await tx.accounting.creditReads([...pairs.values()], o.now());
    for (const [key, { owner, category }] of pairs) {
      const { allocations, held } = found.get(key) ?? { allocations: [], held: 0 };
      reads.set(key, { wallet: walletOf(owner, category, allocations), held });
    }
  }

  return {
    read,
    /**
     * What each priced job holds back (by job id), decided in order, or throws 402 naming the
     * first (as `items[i]`) its owner cannot pay for; call inside the transaction that inserts the
     * jobs (`tx`) with these reservations, before inserting them, with that transaction's `reads`
     * (a new map per transaction).
     */
    async reserve(
      tx: StoreParts,
      jobs: readonly PreparedJob[],
      reads: CreditReads = new Map(),
    ): Promise<Map<string, number>> {
      await read(tx, jobs, reads);
      const reserved = new Map<string, number>();
      for (const [i, job] of jobs.entries()) {
        if (job.product.pricePerUnit === 0) continue;
        const needed = reservationFor(job.product, job.replicas, o.monitorIntervalMs, o.chargePeriodMs);
        const read = reads.get(creditKey(accountOf(job.owner), job.product.category))!;
        const { wallet: w, held } = read;
        if (w.balance <= 0 || w.balance - held < needed) {
          throw paymentRequired(`items[${i}]: ${noCredits(job.owner, w, held, needed)}`);
        }
        reserved.set(job.id, needed);
        read.held += needed;
      }
      return reserved;
    },
  };
}
