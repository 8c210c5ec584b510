import type { AccountingStore, AllocationRecord } from '../accounting.ts';
import { toAllocation } from '../rows.ts';
import type { Connection, Query } from './database.ts';

export function postgresAccounting({ query, atomic, locked }: Connection): AccountingStore {
  const activeAllocations = async (q: Query, owner: string, category: string, at: number, lock = '') =>
    (
      await q(
        `select * from allocations where owner = ? and category = ? and start_at <= ? and end_at > ? order by end_at, id${lock}`,
        owner,
        category,
        at,
        at,
      )
    ).map(toAllocation);
  return {
    async grant(owner, category, credits, startAt, endAt, now = Date.now()) {
      const [r] = await query(
        'insert into allocations (owner, category, credits, start_at, end_at, created_at) values (?, ?, ?, ?, ?, ?) returning id',
        owner,
        category,
        credits,
        startAt,
        endAt,
        now,
      );
      return Number(r!.id);
    },
    async allocations(owner) {
      const rows =
        owner === undefined
          ? await query('select * from allocations order by id')
          : await query('select * from allocations where owner = ? order by id', owner);
      return rows.map(toAllocation);
    },
    activeAllocations: (owner, category, at) => activeAllocations(query, owner, category, at, locked),
    charge(c) {
      return atomic(async (q) => {
        // Unique per charge id, and per job and first period, on every replica: a second one is a
        // retry, or a charge read from the same charged periods, and changes nothing.
        const inserted =
          (await q.changed(
            `insert into charges (charge_id, job_id, owner, category, units, periods, credits, charged_at, first_period)
             values (?, ?, ?, ?, ?, ?, ?, ?, (select charged_periods from jobs where id = ?)) on conflict do nothing`,
            c.chargeId,
            c.jobId,
            c.owner,
            c.category,
            c.units,
            c.periods,
            c.credits,
            c.chargedAt,
            c.jobId,
          )) === 1;
        if (!inserted) return false;
        await q(
          'update jobs set credits_charged = credits_charged + ?, charged_periods = charged_periods + ? where id = ?',
          c.credits,
          c.periods,
          c.jobId,
        );
        const allocations: AllocationRecord[] = await activeAllocations(
          q,
          c.owner,
          c.category,
          c.chargedAt,
          ' for update',
        );
        let remaining = c.credits;
        for (const [i, a] of allocations.entries()) {
          const last = i === allocations.length - 1;
          const take = last ? remaining : Math.min(remaining, Math.max(0, a.credits - a.used));
          if (take !== 0) await q('update allocations set used = used + ? where id = ?', take, a.id);
          remaining -= take;
        }
        return true;
      });
    },
    async charges(owner, from, to) {
      const rows = await query(
        'select * from charges where owner = ? and charged_at >= ? and charged_at < ? order by charged_at',
        owner,
        from,
        to,
      );
      return rows.map((r) => ({
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
