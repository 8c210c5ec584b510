import { type AccountingStore, type AllocationRecord, type ChargeRecord, creditKey } from '../accounting.ts';
import { HELD_CHANGES_KEPT, HELD_CREDITS, heldSum, toAllocation } from '../rows.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

/**
 * An account's held credits in a category, its rows folded into one first when there are more
 * than HELD_CHANGES_KEPT (JobStore.foldHeldCredits and AccountingStore.creditReads both do it).
 */
export function foldHeldCredits(sql: SqliteDatabase['sql'], account: string, category: string): number {
  const r = sql(HELD_CREDITS).get(account, category) as Row | undefined;
  if (Number(r?.changes ?? 0) > HELD_CHANGES_KEPT) {
    sql('delete from held_credits where account = ? and category = ?').run(account, category);
    sql('insert into held_credits (account, category, credits) values (?, ?, ?)').run(
      account,
      category,
      Number(r!.credits),
    );
  }
  return heldSum(r);
}

export function sqliteAccounting({ sql, transaction }: SqliteDatabase): Synchronous<AccountingStore> {
  const activeAllocations = (owner: string, category: string, at: number): AllocationRecord[] =>
    (
      sql(
        'select * from allocations where owner = ? and category = ? and start_at <= ? and end_at > ? order by end_at, id',
      ).all(owner, category, at, at) as Row[]
    ).map(toAllocation);

  function charge(c: ChargeRecord): boolean {
    return transaction(() => {
      // Unique per charge id, and per job and first period: see the migration.
      const inserted =
        sql(
          `insert or ignore into charges (charge_id, job_id, owner, category, units, periods, credits, charged_at, first_period)
           values (?, ?, ?, ?, ?, ?, ?, ?, (select charged_periods from jobs where id = ?))`,
        ).run(c.chargeId, c.jobId, c.owner, c.category, c.units, c.periods, c.credits, c.chargedAt, c.jobId)
          .changes === 1;
      if (!inserted) return false;
      sql(
        'update jobs set credits_charged = credits_charged + ?, charged_periods = charged_periods + ? where id = ?',
      ).run(c.credits, c.periods, c.jobId);
      const allocations = activeAllocations(c.owner, c.category, c.chargedAt);
      let remaining = c.credits;
      allocations.forEach((a, i) => {
        const last = i === allocations.length - 1;
        const take = last ? remaining : Math.min(remaining, Math.max(0, a.credits - a.used));
        if (take !== 0) sql('update allocations set used = used + ? where id = ?').run(take, a.id);
        remaining -= take;
      });
      return true;
    });
  }

  return {
    grant(owner, category, credits, startAt, endAt, now = Date.now()) {
      return Number(
        sql(
          'insert into allocations (owner, category, credits, start_at, end_at, created_at) values (?, ?, ?, ?, ?, ?)',
        ).run(owner, category, credits, startAt, endAt, now).lastInsertRowid,
      );
    },
    allocations(owner) {
      const rows = (
        owner === undefined
          ? sql('select * from allocations order by id').all()
          : sql('select * from allocations where owner = ? order by id').all(owner)
      ) as Row[];
      return rows.map(toAllocation);
    },
    activeAllocations,
    creditReads(pairs, at) {
      const out = new Map<string, { allocations: AllocationRecord[]; held: number }>();
      for (const { owner, category } of pairs) {
        const key = creditKey(owner, category);
        if (out.has(key)) continue;
        const held = foldHeldCredits(sql, owner, category);
        out.set(key, { allocations: activeAllocations(owner, category, at), held });
      }
      return out;
    },
    charge,
    chargeMany(cs) {
      // One process, statements in memory: each in turn is as cheap as one for all.
      return transaction(() => new Set(cs.filter(charge).map((c) => c.chargeId)));
    },
    charges(owner, from, to) {
      return (
        sql(
          'select * from charges where owner = ? and charged_at >= ? and charged_at < ? order by charged_at',
        ).all(owner, from, to) as Row[]
      ).map((r) => ({
        chargeId: r.charge_id as string,
        jobId: r.job_id as string,
        owner: r.owner as string,
        category: r.category as string,
        units: Number(r.units),
        periods: Number(r.periods),
        credits: Number(r.credits),
        chargedAt: Number(r.charged_at),
      }));
    },
  };
}
