import { type AccountingStore, type AllocationRecord, type ChargeRecord, creditKey } from '../accounting.ts';
import { HELD_CHANGES_KEPT, heldSum, toAllocation } from '../rows.ts';
import type { Connection, Query } from './database.ts';

/** An owner's held credits folded into one row: only the rows this statement deletes are folded. */
export const FOLD_HELD_CREDITS = `with gone as (delete from held_credits where account = ? and category = ? returning credits)
  insert into held_credits (account, category, credits)
  select ?, ?, sum(credits) from gone having count(*) > 0`;

export function postgresAccounting({
  query,
  atomic,
  locked,
  atCommit,
  several,
}: Connection): AccountingStore {
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
    async creditReads(pairs, at) {
      const out = new Map<string, { allocations: AllocationRecord[]; held: number }>();
      if (pairs.length === 0) return out;
      const owners = pairs.map((p) => p.owner);
      const categories = pairs.map((p) => p.category);
      // One owner and category (most batches): plain equalities, which PostgreSQL plans in less
      // time than a join with unnest (the statements are inlined, so planned each time).
      const one = pairs.length === 1;
      const statements = [
        // Locked in one order (owner, category, then as activeAllocations): two intakes never
        // wait on each other in a cycle.
        one
          ? [
              `select * from allocations where owner = ? and category = ? and start_at <= ? and end_at > ?
               order by end_at, id${locked}`,
              [owners[0], categories[0], at, at],
            ]
          : [
              `select * from allocations where (owner, category) in (select * from unnest(?::text[], ?::text[]))
               and start_at <= ? and end_at > ? order by owner, category, end_at, id${locked}`,
              [owners, categories, at, at],
            ],
        // A statement of its own, after the locks: it sees the held credits committed before them.
        one
          ? [
              `select account, category, count(*) as changes, coalesce(sum(credits), 0) as credits from held_credits
               where account = ? and category = ? group by account, category`,
              [owners[0], categories[0]],
            ]
          : [
              `select account, category, count(*) as changes, coalesce(sum(credits), 0) as credits from held_credits
               where (account, category) in (select * from unnest(?::text[], ?::text[])) group by account, category`,
              [owners, categories],
            ],
      ] as [readonly [string, unknown[]], readonly [string, unknown[]]];
      const [allocations, held] = several
        ? await several(statements)
        : [
            await query(statements[0][0], ...statements[0][1]),
            await query(statements[1][0], ...statements[1][1]),
          ];
      for (const p of pairs) out.set(creditKey(p.owner, p.category), { allocations: [], held: 0 });
      for (const r of allocations!)
        out.get(creditKey(r.owner as string, r.category as string))?.allocations.push(toAllocation(r));
      for (const r of held!) {
        const read = out.get(creditKey(r.account as string, r.category as string));
        if (read) read.held = heldSum(r);
        if (Number(r.changes) > HELD_CHANGES_KEPT) {
          const values = [r.account, r.category, r.account, r.category];
          if (atCommit) atCommit(FOLD_HELD_CREDITS, values);
          else await query(FOLD_HELD_CREDITS, ...values);
        }
      }
      return out;
    },
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
    chargeMany(cs) {
      if (cs.length === 0) return Promise.resolve(new Set<string>());
      return atomic(async (q) => {
        // As `charge`, for every job at once: recorded unless recorded already (by id, or by job
        // and first period), each job's charged credits and periods raised in the same statement.
        const col = <T>(of: (c: ChargeRecord) => T) => cs.map(of);
        const recorded = await q(
          `with inserted as (
             insert into charges (charge_id, job_id, owner, category, units, periods, credits, charged_at, first_period)
             select u.*, j.charged_periods from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[],
               ?::bigint[], ?::double precision[], ?::bigint[])
               as u(charge_id, job_id, owner, category, units, periods, credits, charged_at)
               left join jobs j on j.id = u.job_id
             on conflict do nothing returning charge_id, job_id, credits, periods),
           jobs_charged as (
             update jobs set credits_charged = jobs.credits_charged + inserted.credits,
               charged_periods = jobs.charged_periods + inserted.periods
             from inserted where jobs.id = inserted.job_id returning jobs.id)
           select charge_id from inserted`,
          col((c) => c.chargeId),
          col((c) => c.jobId),
          col((c) => c.owner),
          col((c) => c.category),
          col((c) => c.units),
          col((c) => c.periods),
          col((c) => c.credits),
          col((c) => c.chargedAt),
        );
        const ids = new Set(recorded.map((r) => r.charge_id as string));
        // What each owner and category draws, on its allocations read (and locked) once.
        const drawn = new Map<string, { c: ChargeRecord; credits: number }>();
        for (const c of cs) {
          if (!ids.has(c.chargeId)) continue;
          const key = `${c.owner}\0${c.category}\0${c.chargedAt}`;
          const group = drawn.get(key) ?? { c, credits: 0 };
          group.credits += c.credits;
          drawn.set(key, group);
        }
        const takes: [number, number][] = [];
        for (const { c, credits } of drawn.values()) {
          const allocations = await activeAllocations(q, c.owner, c.category, c.chargedAt, ' for update');
          let remaining = credits;
          for (const [i, a] of allocations.entries()) {
            const last = i === allocations.length - 1;
            const take = last ? remaining : Math.min(remaining, Math.max(0, a.credits - a.used));
            if (take !== 0) takes.push([a.id, take]);
            remaining -= take;
          }
        }
        if (takes.length > 0)
          await q(
            `update allocations set used = allocations.used + t.take
             from unnest(?::bigint[], ?::double precision[]) as t(id, take) where allocations.id = t.id`,
            takes.map((t) => t[0]),
            takes.map((t) => t[1]),
          );
        return ids;
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
