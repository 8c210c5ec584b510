import { accountOf } from '../model/owner.ts';
import type { Charge } from '../plugins/plugin.ts';
import type { ChargeRecord } from '../store/accounting.ts';
import type { ChargedSoFar } from '../store/jobs.ts';
import type { StoreParts, Transactional } from '../store/store.ts';
import type { JobAccess } from './access.ts';
import type { JobMirror } from './mirror.ts';

// Charges (LifecycleContext.charge), written in batches: the charges asked for while a batch is
// being written go together in the next one, one transaction for all (their jobs read in one
// statement, recorded in one, each owner's allocations and held credits read once). A leader ends
// many jobs at once, and each ended job is charged.

export interface ChargingOptions {
  store: Transactional;
  access: JobAccess;
  now: () => number;
  requireCredits: boolean;
  /** Told of every charge in the transaction that records it. */
  mirror?: JobMirror;
}

export interface ChargeResult {
  creditsLeft: number;
  unpaid: number;
}

interface Asked {
  charge: Charge;
  resolve: (result: ChargeResult) => void;
  reject: (error: unknown) => void;
}

export function jobCharging(o: ChargingOptions) {
  const { store, access, now } = o;
  let asked: Asked[] = [];
  let writing = false;

  function charge(c: Charge): Promise<ChargeResult> {
    return new Promise((resolve, reject) => {
      if (asked.length === 0 && !writing) setImmediate(next);
      asked.push({ charge: c, resolve, reject });
    });
  }

  /** Writes the charges asked for so far, one per job (a job's next one waits for the batch after). */
  function next(): void {
    if (writing || asked.length === 0) return;
    const jobs = new Set<string>();
    const batch: Asked[] = [];
    const later: Asked[] = [];
    for (const a of asked) {
      if (jobs.has(a.charge.job.id)) later.push(a);
      else {
        jobs.add(a.charge.job.id);
        batch.push(a);
      }
    }
    asked = later;
    writing = true;
    write(batch.map((a) => a.charge))
      .then(
        (results) => {
          for (const [i, a] of batch.entries()) a.resolve(results[i]!);
        },
        (error: unknown) => {
          for (const a of batch) a.reject(error);
        },
      )
      .finally(() => {
        writing = false;
        next();
      });
  }

  /**
   * Records the charges of distinct jobs in one transaction. A charge must start where the
   * recorded ones end: one computed from a stale copy of its job (its final charge happened
   * meanwhile) names other periods, so its id alone would not stop it from charging them twice. A
   * periodic charge of a job that has ended since is not made at all: its final charge counts its
   * time up to its real end. Only the periods the balance pays are charged (a late pass can find
   * more due than it has credits for); the balance is read with the allocations, locked on
   * PostgreSQL until the charges are written, and each charge of the batch is taken off it for the
   * next of the same owner. What an owner has left is its balance once the batch is written, less
   * what its active jobs hold back.
   */
  function write(cs: readonly Charge[]): Promise<ChargeResult[]> {
    const at = now();
    return store.transaction(async (tx) => {
      // What each job was charged so far, not its whole row (its JSON), read in one statement.
      const jobs = await tx.jobs.chargedSoFar(cs.map((c) => c.job.id));
      const balances = new Map<string, number>();
      const key = (c: Charge) => `${accountOf(c.job.owner)}\0${c.category}`;
      const balanceOf = async (c: Charge) => {
        let balance = balances.get(key(c));
        if (balance === undefined) {
          balance = o.requireCredits
            ? (await access.wallet(accountOf(c.job.owner), c.category, at, tx)).balance
            : Number.POSITIVE_INFINITY;
          balances.set(key(c), balance);
        }
        return balance;
      };
      const planned = [];
      for (const c of cs) {
        const plan = planCharge(c, jobs.get(c.job.id), await balanceOf(c), at);
        if (plan.record) balances.set(key(c), (balances.get(key(c)) ?? 0) - plan.record.credits);
        planned.push(plan);
      }
      const records = planned.flatMap((p) => (p.record ? [p.record] : []));
      const recorded = await tx.accounting.chargeMany(records);
      for (const [i, p] of planned.entries()) {
        if (!p.record) continue;
        // Recorded already (by another replica): its credits came off the balance read above.
        if (!recorded.has(p.record.chargeId))
          balances.set(key(cs[i]!), (balances.get(key(cs[i]!)) ?? 0) + p.record.credits);
        else await mirrored(tx, cs[i]!, p.record, jobs.get(p.record.jobId)!);
      }
      const held = new Map<string, number>();
      const results: ChargeResult[] = [];
      for (const [i, c] of cs.entries()) {
        if (!o.requireCredits) {
          results.push({ unpaid: planned[i]!.unpaid, creditsLeft: Number.POSITIVE_INFINITY });
          continue;
        }
        // Read (its changes folded) with the owner's allocations locked, as a fold must be.
        if (!held.has(key(c))) held.set(key(c), await tx.jobs.foldHeldCredits(c.job.owner, c.category));
        results.push({ unpaid: planned[i]!.unpaid, creditsLeft: (await balanceOf(c)) - held.get(key(c))! });
      }
      return results;
    });
  }

  async function mirrored(tx: StoreParts, c: Charge, record: ChargeRecord, before: ChargedSoFar) {
    await o.mirror?.chargeWritten(tx, record, c.job.owner, before.creditsCharged + record.credits);
  }

  return { charge };
}

/** The charge to record of `c` (none: stale, or nothing paid) and the periods left unpaid. */
function planCharge(
  c: Charge,
  before: ChargedSoFar | undefined,
  balance: number,
  at: number,
): { record?: ChargeRecord; unpaid: number } {
  if (before?.chargedPeriods !== c.firstPeriod) return { unpaid: 0 };
  if (c.job.state === 'RUNNING' && before.state !== 'RUNNING') return { unpaid: 0 };
  const creditsPerPeriod = c.credits / c.periods;
  const periods =
    creditsPerPeriod > 0
      ? Math.min(c.periods, Math.max(0, Math.floor(balance / creditsPerPeriod)))
      : c.periods;
  if (periods === 0) return { unpaid: c.periods };
  const last = c.firstPeriod + periods - 1;
  return {
    unpaid: c.periods - periods,
    record: {
      chargeId: `${c.job.id}:${c.firstPeriod}-${last}`,
      jobId: c.job.id,
      owner: accountOf(c.job.owner),
      category: c.category,
      units: c.units,
      periods,
      credits: creditsPerPeriod * periods,
      chargedAt: at,
    },
  };
}
