import type { SQLInputValue } from 'node:sqlite';
import type { JobState, JobUpdate } from '../../model/job.ts';
import { accountOf } from '../../model/owner.ts';
import type { ChargedSoFar, JobChanges, JobRecord, JobStore, SubmissionState } from '../jobs.ts';
import {
  activeJobs,
  chargedSoFarWhere,
  expiringPage,
  HELD_CREDITS,
  heldSum,
  JOB_COLUMNS,
  jobChangeAssignments,
  markSubmittedWhere,
  runningOf,
  runningPage,
  toChargedSoFar,
  toJob,
  toRunningJob,
} from '../rows.ts';
import { foldHeldCredits } from './accounting.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';
import { recordJobEvent } from './job-events.ts';

export function sqliteJobs(d: SqliteDatabase): Synchronous<JobStore> {
  const { sql } = d;
  function appendUpdate(job: JobRecord, update: JobUpdate, changes: JobChanges): void {
    const { sets, values } = jobChangeAssignments(changes);
    sql(`update jobs set ${sets.join(', ')} where id = ?`).run(...values, job.id);
    sql('insert into job_updates (job_id, seq, body) values (?, ?, ?)').run(
      job.id,
      job.updateCount,
      JSON.stringify(update),
    );
    recordJobEvent(d, job.id, job.updateCount);
  }
  return {
    insert(jobs) {
      for (const job of jobs) {
        sql(
          `insert into jobs (id, created_by, project, state, application, created_at, specification,
             product_category, time_allocation_ms, price_per_unit, reserved_credits, update_count)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
        ).run(
          job.id,
          job.createdBy,
          job.project,
          job.firstUpdate.state ?? 'IN_QUEUE',
          job.application,
          job.createdAt,
          JSON.stringify(job.specification),
          job.specification.product.category,
          job.timeAllocationMs,
          job.pricePerUnit,
          job.reservedCredits ?? 0,
        );
        sql('insert into job_updates (job_id, seq, body) values (?, 0, ?)').run(
          job.id,
          JSON.stringify(job.firstUpdate),
        );
        recordJobEvent(d, job.id, 0);
      }
    },
    state(id) {
      const r = sql('select state from jobs where id = ?').get(id) as Row | undefined;
      return r?.state as JobState | undefined;
    },
    get(id) {
      const r = sql(`select ${JOB_COLUMNS} from jobs where id = ?`).get(id) as Row | undefined;
      return r && toJob(r);
    },
    getMany(ids) {
      const out = new Map<string, JobRecord>();
      for (const id of ids) {
        const r = sql(`select ${JOB_COLUMNS} from jobs where id = ?`).get(id) as Row | undefined;
        if (r) out.set(id, toJob(r));
      }
      return out;
    },
    builds(ids) {
      const out = new Map<string, string>();
      for (const id of new Set(ids)) {
        const r = sql('select build from jobs where id = ? and build is not null').get(id) as Row | undefined;
        if (r) out.set(id, r.build as string);
      }
      return out;
    },
    updatesOf(id) {
      return (sql('select body from job_updates where job_id = ? order by seq').all(id) as Row[]).map(
        (r) => JSON.parse(r.body as string) as JobUpdate,
      );
    },
    appendUpdate,
    appendUpdates(writes) {
      // One process, statements in memory: each in turn is as cheap as one for all.
      d.transaction(() => {
        for (const w of writes) appendUpdate(w.job, w.update, w.changes);
      });
    },
    markEnding(id, outcome) {
      return (
        sql(
          `update jobs set outcome = ?, outcome_by = ?, outcome_reason = ?
           where id = ? and outcome is null and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')`,
        ).run(outcome.kind, outcome.by ?? null, outcome.reason ?? null, id).changes === 1
      );
    },
    unmarkEnding(id) {
      sql(
        `update jobs set outcome = null, outcome_by = null, outcome_reason = null
         where id = ? and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')`,
      ).run(id);
    },
    chargedSoFar(ids) {
      const out = new Map<string, ChargedSoFar>();
      for (const id of ids) {
        const r = sql(chargedSoFarWhere('id = ?')).get(id) as Row | undefined;
        if (r) out.set(id, toChargedSoFar(r));
      }
      return out;
    },
    heldCredits(owner, category) {
      return heldSum(sql(HELD_CREDITS).get(accountOf(owner), category) as Row | undefined);
    },
    foldHeldCredits(owner, category) {
      return foldHeldCredits(sql, accountOf(owner), category);
    },
    rename(id, name) {
      sql(
        "update jobs set specification = case when ? is null then json_remove(specification, '$.name') else json_set(specification, '$.name', ?) end where id = ?",
      ).run(name, name, id);
      recordJobEvent(d, id, null);
    },
    markSubmitted(ids) {
      const out = new Map<string, JobState>();
      for (const id of new Set(ids)) {
        const r = sql(markSubmittedWhere('id = ?')).get(id) as Row | undefined;
        if (r) out.set(id, r.state as JobState);
      }
      return out;
    },
    submissionStates(ids) {
      const out = new Map<string, SubmissionState>();
      for (const id of new Set(ids)) {
        const r = sql('select state, submitted from jobs where id = ?').get(id) as Row | undefined;
        if (r) out.set(id, { state: r.state as JobState, submitted: r.submitted === 1 });
      }
      return out;
    },
    browse(q) {
      const where: string[] = [];
      const values: SQLInputValue[] = [];
      if (q.visibility !== 'all') {
        const v = q.visibility;
        const parts = ['(project is null and created_by = ?)'];
        values.push(v.username);
        if (v.allOf.length > 0) {
          parts.push(`project in (${v.allOf.map(() => '?').join(', ')})`);
          values.push(...v.allOf);
        }
        if (v.ownOf.length > 0) {
          parts.push(`(created_by = ? and project in (${v.ownOf.map(() => '?').join(', ')}))`);
          values.push(v.username, ...v.ownOf);
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
        ["json_extract(specification, '$.product.id') = ?", q.productId],
        ['product_category = ?', q.productCategory],
        ['project = ?', q.project],
      ];
      for (const [condition, value] of equal) {
        if (value === undefined) continue;
        where.push(condition);
        values.push(value);
      }
      if (q.ids !== undefined) {
        where.push(`id in (${q.ids.map(() => '?').join(', ')})`);
        values.push(...q.ids);
      }
      if (q.query !== undefined) {
        where.push(
          "(instr(lower(id || ' ' || application || ' ' || coalesce(json_extract(specification, '$.name'), '')), lower(?)) > 0)",
        );
        values.push(q.query);
      }
      if (q.before !== undefined) {
        where.push(q.ascending === true ? 'id > ?' : 'id < ?');
        values.push(q.before);
      }
      const clause = where.length > 0 ? `where ${where.join(' and ')}` : '';
      const order = q.ascending === true ? 'asc' : 'desc';
      return (
        sql(`select ${JOB_COLUMNS} from jobs ${clause} order by id ${order} limit ?`).all(
          ...values,
          q.limit,
        ) as Row[]
      ).map(toJob);
    },
    active() {
      return (sql(activeJobs('job')).all() as Row[]).map(toJob);
    },
    activeRows() {
      return (sql(activeJobs('running-job')).all() as Row[]).map(toRunningJob);
    },
    unsubmitted(limit) {
      return (
        sql(`select id from jobs where state = 'IN_QUEUE' and submitted = 0 order by id limit ?`).all(
          limit,
        ) as Row[]
      ).map((r) => r.id as string);
    },
    running(after, limit) {
      return (sql(runningPage('job')).all(after ?? '', limit) as Row[]).map(toJob);
    },
    runningRows(after, limit) {
      return (sql(runningPage('running-job')).all(after ?? '', limit) as Row[]).map(toRunningJob);
    },
    expiringRows(by, after, limit) {
      return (sql(expiringPage).all(by, after ?? '', limit) as Row[]).map(toRunningJob);
    },
    runningIds(after, limit) {
      // Rows as arrays (this statement's only use): an object per row allocated three times the
      // bytes, and the resource sampler reads every running id every 5 s.
      const statement = sql(runningPage('id'));
      statement.setReturnArrays(true);
      return (statement.all(after ?? '', limit) as unknown as [string][]).map((r) => r[0]);
    },
    runningRowsOf(ids) {
      if (ids.length === 0) return [];
      return (sql(runningOf('sqlite')).all(JSON.stringify(ids)) as Row[]).map(toRunningJob);
    },
    countByState() {
      const out: Record<string, number> = {};
      for (const r of sql('select state, count(*) as n from jobs group by state').all() as Row[]) {
        out[r.state as string] = Number(r.n);
      }
      return out;
    },
    idempotent(username, key) {
      const r = sql('select request_hash, job_ids from idempotency where username = ? and key = ?').get(
        username,
        key,
      ) as Row | undefined;
      return (
        r && { requestHash: r.request_hash as string, jobIds: JSON.parse(r.job_ids as string) as string[] }
      );
    },
    rememberIdempotent(username, key, requestHash, jobIds, now = Date.now()) {
      sql(
        'insert into idempotency (username, key, request_hash, job_ids, created_at) values (?, ?, ?, ?, ?)',
      ).run(username, key, requestHash, JSON.stringify(jobIds), now);
    },
  };
}
