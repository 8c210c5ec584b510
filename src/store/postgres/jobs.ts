import type { JobState, JobUpdate } from '../../model/job.ts';
import { accountOf } from '../../model/owner.ts';
import type { JobStore, NewJob } from '../jobs.ts';
import {
  activeJobs,
  chargedSoFarWhere,
  expiringPage,
  HELD_CHANGES_KEPT,
  HELD_CREDITS,
  heldSum,
  JOB_CHANGE_COLUMNS,
  JOB_COLUMNS,
  jobChangeAssignments,
  jobChangeColumns,
  markSubmittedWhere,
  runningOf,
  runningPage,
  toChargedSoFar,
  toJob,
  toRunningJob,
} from '../rows.ts';
import { FOLD_HELD_CREDITS } from './accounting.ts';
import type { Connection } from './database.ts';

// The specification is kept as JSON text, as in SQLite; queries read it as jsonb.

/**
 * Several jobs' updates in one statement: each job's row changed once (its columns' new values in
 * a jsonb object, a column absent from it left as it is; its update count raised by its number of
 * updates), and every update inserted. Two JSON arrays, one statement text whatever the changes.
 */
const APPEND_UPDATES = `with items as (
    select * from jsonb_to_recordset(?::jsonb) as i(id text, n bigint, c jsonb)),
  changed as (
    update jobs j set update_count = j.update_count + i.n,
      ${Object.entries(JOB_CHANGE_COLUMNS)
        .map(
          ([c, type]) =>
            `${c} = case when i.c -> '${c}' is null then j.${c} else (i.c ->> '${c}')::${type} end`,
        )
        .join(',\n      ')}
    from items i where j.id = i.id returning j.id)
  insert into job_updates (job_id, seq, body)
  select u.id, u.seq, u.body from jsonb_to_recordset(?::jsonb) as u(id text, seq bigint, body text)
    join changed on changed.id = u.id`;

export function postgresJobs({ query, locked, recordEvent, atCommit }: Connection): JobStore {
  return {
    async insert(jobs) {
      if (jobs.length === 0) return;
      // One statement (one round trip) for every row and its first update: a column per array.
      const column = <T>(of: (job: NewJob) => T) => jobs.map(of);
      // In a transaction, sent with its commit (intake inserts last): one round trip fewer.
      const write = (text: string, ...values: unknown[]) =>
        atCommit ? atCommit(text, values) : query(text, ...values);
      await write(
        `with inserted as (
           insert into jobs (id, created_by, project, state, application, created_at, specification,
             product_category, time_allocation_ms, price_per_unit, reserved_credits, update_count)
           select *, 1 from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[],
             ?::text[], ?::text[], ?::bigint[], ?::double precision[], ?::double precision[])
           returning id)
         insert into job_updates (job_id, seq, body)
         select u.id, 0, u.body from unnest(?::text[], ?::text[]) as u(id, body)
           join inserted on inserted.id = u.id`,
        column((j) => j.id),
        column((j) => j.createdBy),
        column((j) => j.project),
        column((j) => j.firstUpdate.state ?? 'IN_QUEUE'),
        column((j) => j.application),
        column((j) => j.createdAt),
        column((j) => JSON.stringify(j.specification)),
        column((j) => j.specification.product.category),
        column((j) => j.timeAllocationMs),
        column((j) => j.pricePerUnit),
        column((j) => j.reservedCredits ?? 0),
        column((j) => j.id),
        column((j) => JSON.stringify(j.firstUpdate)),
      );
      for (const job of jobs) await recordEvent(job.id, 0);
    },
    async state(id) {
      const [r] = await query('select state from jobs where id = ?', id);
      return r?.state as JobState | undefined;
    },
    async get(id) {
      const [r] = await query(`select ${JOB_COLUMNS} from jobs where id = ?${locked}`, id);
      return r && toJob(r);
    },
    async getMany(ids) {
      if (ids.length === 0) return new Map();
      // Locked in the order of the ids: two transactions locking overlapping sets never wait on each other in a cycle.
      const rows = await query(
        `select ${JOB_COLUMNS} from jobs where id = any(?::text[]) order by id${locked}`,
        [...new Set(ids)],
      );
      return new Map(rows.map((r) => [r.id as string, toJob(r)]));
    },
    async updatesOf(id) {
      const rows = await query('select body from job_updates where job_id = ? order by seq', id);
      return rows.map((r) => JSON.parse(r.body as string) as JobUpdate);
    },
    async builds(ids) {
      if (ids.length === 0) return new Map();
      const rows = await query('select id, build from jobs where id = any(?::text[]) and build is not null', [
        ...new Set(ids),
      ]);
      return new Map(rows.map((r) => [r.id as string, r.build as string]));
    },
    async appendUpdate(job, update, changes) {
      // One statement (one round trip) for the row and its update.
      const { sets, values } = jobChangeAssignments(changes);
      await query(
        `with changed as (update jobs set ${sets.join(', ')} where id = ? returning id)
         insert into job_updates (job_id, seq, body) select id, ?::bigint, ?::text from changed`,
        ...values,
        job.id,
        job.updateCount,
        JSON.stringify(update),
      );
      await recordEvent(job.id, job.updateCount);
    },
    async appendUpdates(writes) {
      if (writes.length === 0) return;
      // A job with several updates here has its row changed once: by all their changes, in order.
      const rows = new Map<string, { id: string; n: number; c: Record<string, string | number | null> }>();
      for (const { job, changes } of writes) {
        const row = rows.get(job.id) ?? { id: job.id, n: 0, c: {} };
        row.n++;
        Object.assign(row.c, jobChangeColumns(changes));
        rows.set(job.id, row);
      }
      await query(
        APPEND_UPDATES,
        JSON.stringify([...rows.values()]),
        JSON.stringify(
          writes.map((w) => ({ id: w.job.id, seq: w.job.updateCount, body: JSON.stringify(w.update) })),
        ),
      );
      for (const w of writes) await recordEvent(w.job.id, w.job.updateCount);
    },
    async markEnding(id, outcome) {
      const marked = await query(
        `update jobs set outcome = ?, outcome_by = ?, outcome_reason = ?
         where id = ? and outcome is null and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')
         returning id`,
        outcome.kind,
        outcome.by ?? null,
        outcome.reason ?? null,
        id,
      );
      return marked.length === 1;
    },
    async unmarkEnding(id) {
      await query(
        `update jobs set outcome = null, outcome_by = null, outcome_reason = null
         where id = ? and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')`,
        id,
      );
    },
    async chargedSoFar(ids) {
      if (ids.length === 0) return new Map();
      // Locked in the order of the ids, as getMany's.
      const rows = await query(`${chargedSoFarWhere('id = any(?::text[])')} order by id${locked}`, [
        ...new Set(ids),
      ]);
      return new Map(rows.map((r) => [r.id as string, toChargedSoFar(r)]));
    },
    async heldCredits(owner, category) {
      const [r] = await query(HELD_CREDITS, accountOf(owner), category);
      return heldSum(r);
    },
    async foldHeldCredits(owner, category) {
      const account = accountOf(owner);
      const [r] = await query(HELD_CREDITS, account, category);
      if (Number(r?.changes ?? 0) > HELD_CHANGES_KEPT) {
        // Only the rows this statement deletes are folded: a fold at the same time elsewhere, or a
        // change committed meanwhile, is neither lost nor counted twice.
        await query(FOLD_HELD_CREDITS, account, category, account, category);
      }
      return heldSum(r);
    },
    async rename(id, name) {
      await query(
        `update jobs set specification = case when ?::text is null then (specification::jsonb - 'name')::text
           else jsonb_set(specification::jsonb, '{name}', to_jsonb(?::text))::text end where id = ?`,
        name,
        name,
        id,
      );
      await recordEvent(id, null);
    },
    async markSubmitted(ids) {
      if (ids.length === 0) return new Map();
      const rows = await query(markSubmittedWhere('id = any(?::text[])'), [...new Set(ids)]);
      return new Map(rows.map((r) => [r.id as string, r.state as JobState]));
    },
    async submissionStates(ids) {
      if (ids.length === 0) return new Map();
      const rows = await query('select id, state, submitted from jobs where id = any(?::text[])', [
        ...new Set(ids),
      ]);
      return new Map(
        rows.map((r) => [
          r.id as string,
          { state: r.state as JobState, submitted: Number(r.submitted) === 1 },
        ]),
      );
    },
    async browse(q) {
      const where: string[] = [];
      const values: unknown[] = [];
      if (q.visibility !== 'all') {
        const v = q.visibility;
        const parts = ['(project is null and created_by = ?)'];
        values.push(v.username);
        if (v.allOf.length > 0) {
          parts.push('project = any(?::text[])');
          values.push(v.allOf);
        }
        if (v.ownOf.length > 0) {
          parts.push('(created_by = ? and project = any(?::text[]))');
          values.push(v.username, v.ownOf);
        }
        where.push(`(${parts.join(' or ')})`);
      }
      const equal: [string, string | number | undefined][] = [
        ['state = ?', q.state],
        ["outcome = ? and state in ('SUCCESS', 'FAILURE', 'EXPIRED')", q.outcome],
        ['application = ?', q.application],
        ['created_by = ?', q.createdBy],
        ['created_at >= ?', q.createdAfter],
        ['created_at < ?', q.createdBefore],
        ["specification::jsonb #>> '{product,id}' = ?", q.productId],
        ['product_category = ?', q.productCategory],
        ['project = ?', q.project],
      ];
      for (const [condition, value] of equal) {
        if (value === undefined) continue;
        where.push(condition);
        values.push(value);
      }
      if (q.ids !== undefined) {
        where.push('id = any(?::text[])');
        values.push(q.ids);
      }
      if (q.query !== undefined) {
        where.push(
          "strpos(lower(id || ' ' || application || ' ' || coalesce(specification::jsonb ->> 'name', '')), lower(?)) > 0",
        );
        values.push(q.query);
      }
      if (q.before !== undefined) {
        where.push(q.ascending === true ? 'id > ?' : 'id < ?');
        values.push(q.before);
      }
      const clause = where.length > 0 ? `where ${where.join(' and ')}` : '';
      const order = q.ascending === true ? 'asc' : 'desc';
      const rows = await query(
        `select ${JOB_COLUMNS} from jobs ${clause} order by id ${order} limit ?`,
        ...values,
        q.limit,
      );
      return rows.map(toJob);
    },
    async active() {
      return (await query(activeJobs('job'))).map(toJob);
    },
    async activeRows() {
      return (await query(activeJobs('running-job'))).map(toRunningJob);
    },
    async unsubmitted(limit) {
      const rows = await query(
        `select id from jobs where state = 'IN_QUEUE' and submitted = 0 order by id limit ?`,
        limit,
      );
      return rows.map((r) => r.id as string);
    },
    async running(after, limit) {
      return (await query(runningPage('job'), after ?? '', limit)).map(toJob);
    },
    async runningRows(after, limit) {
      return (await query(runningPage('running-job'), after ?? '', limit)).map(toRunningJob);
    },
    async expiringRows(by, after, limit) {
      return (await query(expiringPage, by, after ?? '', limit)).map(toRunningJob);
    },
    async runningIds(after, limit) {
      return (await query(runningPage('id'), after ?? '', limit)).map((r) => r.id as string);
    },
    async runningRowsOf(ids) {
      if (ids.length === 0) return [];
      return (await query(runningOf('postgres'), [...ids])).map(toRunningJob);
    },
    async countByState() {
      const out: Record<string, number> = {};
      for (const r of await query('select state, count(*) as n from jobs group by state')) {
        out[r.state as string] = Number(r.n);
      }
      return out;
    },
    async idempotent(username, key) {
      const [r] = await query(
        'select request_hash, job_ids from idempotency where username = ? and key = ?',
        username,
        key,
      );
      return (
        r && { requestHash: r.request_hash as string, jobIds: JSON.parse(r.job_ids as string) as string[] }
      );
    },
    async rememberIdempotent(username, key, requestHash, jobIds, now = Date.now()) {
      await query(
        'insert into idempotency (username, key, request_hash, job_ids, created_at) values (?, ?, ?, ?, ?)',
        username,
        key,
        requestHash,
        JSON.stringify(jobIds),
        now,
      );
    },
  };
}
