import { hash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import type { JobSpecification, JobState, JobUpdate } from '../model/job.ts';
import type { Outcome, OutcomeKind } from '../model/outcome.ts';
import { MIGRATIONS } from './migrations.ts';

export type Role = 'PI' | 'ADMIN' | 'USER';

export interface UserRecord {
  name: string;
  admin: boolean;
  createdAt: number;
  /** When an administrator disabled the user; null while enabled. */
  disabledAt: number | null;
}

const toUser = (r: Row): UserRecord => ({
  name: r.name as string,
  admin: r.admin === 1,
  createdAt: Number(r.created_at),
  disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
});

export interface JobRecord {
  id: string;
  createdBy: string;
  project: string | null;
  state: JobState;
  application: string;
  createdAt: number;
  specification: JobSpecification;
  timeAllocationMs: number | null;
  startedAt: number | null;
  expiresAt: number | null;
  outputFolder: string | null;
  exitCodes: Record<string, number> | null;
  submitted: boolean;
  pricePerUnit: number;
  creditsCharged: number;
  chargedPeriods: number;
  /** When the current run started; null while none is under way (queued, suspended). */
  runStartedAt: number | null;
  /** How long the job's runs before the current one ran, in all. */
  timeRunBeforeMs: number;
  /** The JobBuild as submitted (JSON), kept so that plugins and recovery read the same objects. */
  build: string | null;
  updateCount: number;
  /**
   * How the job ended; while it is active, how ucompute is ending it (a cancel, its owner's
   * credits, its expiry), so that its end is that one whatever the backend says meanwhile.
   */
  outcome: Outcome | null;
}

/** Column changes that go with an update, applied in the same transaction. */
export interface JobChanges {
  state?: JobState;
  startedAt?: number | null;
  runStartedAt?: number | null;
  timeRunBeforeMs?: number;
  expiresAt?: number | null;
  timeAllocationMs?: number | null;
  outputFolder?: string;
  exitCodes?: Record<string, number>;
  submitted?: boolean;
  build?: null;
  outcome?: Outcome;
}

export interface NewJob {
  id: string;
  createdBy: string;
  project: string | null;
  application: string;
  createdAt: number;
  specification: JobSpecification;
  timeAllocationMs: number | null;
  pricePerUnit: number;
  firstUpdate: JobUpdate;
}

export interface JobVisibility {
  username: string;
  /** Projects whose every job the user sees (PI, ADMIN). */
  allOf: readonly string[];
  /** Projects where the user sees only their own jobs (USER). */
  ownOf: readonly string[];
}

export interface BrowseQuery {
  visibility: JobVisibility | 'all';
  state?: JobState;
  /** Final jobs that ended this way. */
  outcome?: OutcomeKind;
  application?: string;
  createdBy?: string;
  /** Epoch ms, inclusive. */
  createdAfter?: number;
  /** Epoch ms, exclusive. */
  createdBefore?: number;
  productId?: string;
  productCategory?: string;
  project?: string;
  ids?: readonly string[];
  /** Case-insensitive text in the job's id, name or application name. */
  query?: string;
  /** Oldest first; newest first by default. */
  ascending?: boolean;
  /** Ids sort by creation time; the page starts after this id, in the page's order. */
  before?: string;
  limit: number;
}

export interface ChargeRecord {
  chargeId: string;
  jobId: string;
  owner: string;
  category: string;
  units: number;
  periods: number;
  credits: number;
  chargedAt: number;
}

export interface AllocationRecord {
  id: number;
  owner: string;
  category: string;
  credits: number;
  used: number;
  startAt: number;
  endAt: number;
}

type Row = Record<string, SQLInputValue>;

export interface SessionRecord {
  hash: string;
  /** TICKET: the one-time secret of a web session URL, traded for a WEB session on its origin. */
  kind: 'TICKET' | 'WEB' | 'VNC' | 'SHELL';
  jobId: string;
  rank: number;
  username: string;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
}

const toSession = (r: Row): SessionRecord => ({
  hash: r.hash as string,
  kind: r.kind as SessionRecord['kind'],
  jobId: r.job_id as string,
  rank: Number(r.rank),
  username: r.username as string,
  createdAt: Number(r.created_at),
  lastUsedAt: Number(r.last_used_at),
  expiresAt: Number(r.expires_at),
});

/** A signed-in browser of the web interface (its cookie's secret is known by hash only). */
export interface UiSessionRecord {
  hash: string;
  username: string;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
}

export type Store = ReturnType<typeof openStore>;

/**
 * The durable store: SQLite (Node's built-in driver) in WAL mode. Every write is a transaction.
 * Transactions marked durable (accepting jobs) are synced to disk before they return, and so
 * survive power loss; the others survive a crash of ucompute and are synced by the next durable
 * one. Lifecycle updates can be had again from the backend; accepted jobs cannot.
 */
export function openStore(path: string) {
  if (path !== ':memory:') {
    // ucompute's alone: created 0700/0600 (SQLite gives its -wal and -shm files the database's mode).
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, 'a', 0o600));
  }
  const db = new DatabaseSync(path);
  // ucompute is the database's only user: holding the lock spares lock calls on every
  // transaction (and lets WAL keep its index in memory). A second ucompute on the folder is refused.
  db.exec('pragma locking_mode = exclusive; pragma journal_mode = wal; pragma synchronous = normal');
  // An 8 MiB page cache holds what is hot (the newest jobs and their index pages); a larger one
  // (64 MiB before) only filled up with old jobs as they were stored, and the server's memory grew
  // with it, by 100 MiB over 100,000 jobs.
  db.exec('pragma foreign_keys = on; pragma busy_timeout = 5000; pragma cache_size = -8192');
  // Checkpoint every 64 MiB of log rather than 4: hot pages (the newest jobs, their indexes) are
  // rewritten by every transaction, and a longer log copies each back to the database once.
  db.exec('pragma wal_autocheckpoint = 16384');
  // A transaction larger than that (a burst of backend events) grows the log file past it, and a
  // log file never shrinks by itself: after each checkpoint it is cut back to 64 MiB.
  db.exec('pragma journal_size_limit = 67108864');
  migrate(db);

  const statements = new Map<string, StatementSync>();
  const sql = (text: string): StatementSync => {
    let s = statements.get(text);
    if (!s) {
      s = db.prepare(text);
      statements.set(text, s);
    }
    return s;
  };

  let depth = 0;
  function transaction<T>(fn: () => T, options: { durable?: boolean } = {}): T {
    if (depth > 0) return fn();
    if (options.durable) db.exec('pragma synchronous = full');
    db.exec('begin immediate');
    depth++;
    try {
      const result = fn();
      db.exec('commit');
      return result;
    } catch (e) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL): a second rollback would throw and
      // hide the error that matters.
      if (db.isTransaction) db.exec('rollback');
      throw e;
    } finally {
      depth--;
      if (options.durable) db.exec('pragma synchronous = normal');
    }
  }

  const toJob = (r: Row): JobRecord => ({
    id: r.id as string,
    createdBy: r.created_by as string,
    project: (r.project as string | null) ?? null,
    state: r.state as JobState,
    application: r.application as string,
    createdAt: Number(r.created_at),
    specification: JSON.parse(r.specification as string) as JobSpecification,
    timeAllocationMs: r.time_allocation_ms === null ? null : Number(r.time_allocation_ms),
    startedAt: r.started_at === null ? null : Number(r.started_at),
    expiresAt: r.expires_at === null ? null : Number(r.expires_at),
    outputFolder: (r.output_folder as string | null) ?? null,
    exitCodes: r.exit_codes === null ? null : (JSON.parse(r.exit_codes as string) as Record<string, number>),
    submitted: r.submitted === 1,
    pricePerUnit: Number(r.price_per_unit),
    creditsCharged: Number(r.credits_charged),
    chargedPeriods: Number(r.charged_periods),
    runStartedAt: r.run_started_at === null ? null : Number(r.run_started_at),
    timeRunBeforeMs: Number(r.time_run_before_ms),
    build: (r.build as string | null) ?? null,
    updateCount: Number(r.update_count),
    outcome: r.outcome === null || r.outcome === undefined ? null : outcomeOf(r),
  });

  /** Allocations of an owner in a category that are valid at `at`, the soonest to end first. */
  const activeAllocations = (owner: string, category: string, at: number): AllocationRecord[] =>
    (
      sql(
        'select * from allocations where owner = ? and category = ? and start_at <= ? and end_at > ? order by end_at, id',
      ).all(owner, category, at, at) as Row[]
    ).map(toAllocation);

  return {
    db,
    transaction,
    close: () => db.close(),

    // Users, projects, memberships and tokens.
    createUser(name: string, admin: boolean, now = Date.now()): boolean {
      return (
        sql('insert or ignore into users (name, admin, created_at) values (?, ?, ?)').run(
          name,
          admin ? 1 : 0,
          now,
        ).changes === 1
      );
    },
    getUser(name: string): UserRecord | undefined {
      const r = sql('select * from users where name = ?').get(name) as Row | undefined;
      return r && toUser(r);
    },
    createProject(id: string, title: string, now = Date.now()): boolean {
      return (
        sql('insert or ignore into projects (id, title, created_at) values (?, ?, ?)').run(id, title, now)
          .changes === 1
      );
    },
    projectExists(id: string): boolean {
      return sql('select 1 from projects where id = ?').get(id) !== undefined;
    },
    setMember(projectId: string, username: string, role: Role): void {
      sql(
        'insert into memberships (project_id, username, role) values (?, ?, ?) on conflict (project_id, username) do update set role = excluded.role',
      ).run(projectId, username, role);
    },
    memberships(username: string): { projectId: string; role: Role }[] {
      return (sql('select project_id, role from memberships where username = ?').all(username) as Row[]).map(
        (r) => ({
          projectId: r.project_id as string,
          role: r.role as Role,
        }),
      );
    },
    /** Makes a new API token for a user; only its hash is kept. */
    createToken(username: string, description: string, now = Date.now()): string {
      const token = `uc_${randomBytes(24).toString('base64url')}`;
      sql('insert into tokens (hash, username, description, created_at) values (?, ?, ?, ?)').run(
        hashToken(token),
        username,
        description,
        now,
      );
      return token;
    },
    /** The user a token opens: none for an unknown token, or a disabled user's. */
    userForToken(token: string): UserRecord | undefined {
      const r = sql(
        'select users.* from tokens join users on users.name = tokens.username where tokens.hash = ? and users.disabled_at is null',
      ).get(hashToken(token)) as Row | undefined;
      return r && toUser(r);
    },

    // Jobs and their updates.
    insertJob(job: NewJob): void {
      sql(
        `insert into jobs (id, created_by, project, state, application, created_at, specification,
           time_allocation_ms, price_per_unit, update_count)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
      ).run(
        job.id,
        job.createdBy,
        job.project,
        job.firstUpdate.state ?? 'IN_QUEUE',
        job.application,
        job.createdAt,
        JSON.stringify(job.specification),
        job.timeAllocationMs,
        job.pricePerUnit,
      );
      sql('insert into job_updates (job_id, seq, body) values (?, 0, ?)').run(
        job.id,
        JSON.stringify(job.firstUpdate),
      );
    },
    jobState(id: string): JobState | undefined {
      const r = sql('select state from jobs where id = ?').get(id) as Row | undefined;
      return r?.state as JobState | undefined;
    },
    getJob(id: string): JobRecord | undefined {
      const r = sql('select * from jobs where id = ?').get(id) as Row | undefined;
      return r && toJob(r);
    },
    updatesOf(id: string): JobUpdate[] {
      return (sql('select body from job_updates where job_id = ? order by seq').all(id) as Row[]).map(
        (r) => JSON.parse(r.body as string) as JobUpdate,
      );
    },
    /** Appends an update and applies its column changes; call inside a transaction with the check. */
    appendUpdate(job: JobRecord, update: JobUpdate, changes: JobChanges): void {
      const sets: string[] = ['update_count = update_count + 1'];
      const values: SQLInputValue[] = [];
      const set = (column: string, value: SQLInputValue) => {
        sets.push(`${column} = ?`);
        values.push(value);
      };
      if (changes.state !== undefined) set('state', changes.state);
      if (changes.startedAt !== undefined) set('started_at', changes.startedAt);
      if (changes.runStartedAt !== undefined) set('run_started_at', changes.runStartedAt);
      if (changes.timeRunBeforeMs !== undefined) set('time_run_before_ms', changes.timeRunBeforeMs);
      if (changes.expiresAt !== undefined) set('expires_at', changes.expiresAt);
      if (changes.timeAllocationMs !== undefined) set('time_allocation_ms', changes.timeAllocationMs);
      if (changes.outputFolder !== undefined) set('output_folder', changes.outputFolder);
      if (changes.exitCodes !== undefined) set('exit_codes', JSON.stringify(changes.exitCodes));
      if (changes.submitted !== undefined) set('submitted', changes.submitted ? 1 : 0);
      if (changes.build === null) set('build', null);
      if (changes.outcome !== undefined) {
        set('outcome', changes.outcome.kind);
        set('outcome_by', changes.outcome.by ?? null);
        set('outcome_reason', changes.outcome.reason ?? null);
      }
      sql(`update jobs set ${sets.join(', ')} where id = ?`).run(...values, job.id);
      sql('insert into job_updates (job_id, seq, body) values (?, ?, ?)').run(
        job.id,
        job.updateCount,
        JSON.stringify(update),
      );
    },
    /**
     * Records how ucompute is ending an active job, unless something is ending it already; answers
     * whether this one was recorded.
     */
    markEnding(id: string, outcome: Outcome): boolean {
      return (
        sql(
          `update jobs set outcome = ?, outcome_by = ?, outcome_reason = ?
           where id = ? and outcome is null and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')`,
        ).run(outcome.kind, outcome.by ?? null, outcome.reason ?? null, id).changes === 1
      );
    },
    /** Forgets how an active job was being ended (the backend could not stop it). */
    unmarkEnding(id: string): void {
      sql(
        `update jobs set outcome = null, outcome_by = null, outcome_reason = null
         where id = ? and state not in ('SUCCESS', 'FAILURE', 'EXPIRED')`,
      ).run(id);
    },
    /** Gives a job another name (null: none); the rest of its specification stays. */
    renameJob(id: string, name: string | null): void {
      sql(
        "update jobs set specification = case when ? is null then json_remove(specification, '$.name') else json_set(specification, '$.name', ?) end where id = ?",
      ).run(name, name, id);
    },
    /** Keeps the build before it goes to the backend, so that a restart submits the same objects. */
    saveBuild(id: string, build: string): void {
      sql('update jobs set build = ? where id = ?').run(build, id);
    },
    markSubmitted(id: string): void {
      sql('update jobs set submitted = 1 where id = ?').run(id);
    },
    /** The backend no longer has the job (suspended): the next submission sends it again. */
    markUnsubmitted(id: string): void {
      sql('update jobs set submitted = 0 where id = ?').run(id);
    },
    browseJobs(q: BrowseQuery): JobRecord[] {
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
      if (q.state !== undefined) {
        where.push('state = ?');
        values.push(q.state);
      }
      if (q.outcome !== undefined) {
        where.push("outcome = ? and state in ('SUCCESS', 'FAILURE', 'EXPIRED')");
        values.push(q.outcome);
      }
      if (q.application !== undefined) {
        where.push('application = ?');
        values.push(q.application);
      }
      const equal: [string, string | number | undefined][] = [
        ['created_by = ?', q.createdBy],
        ['created_at >= ?', q.createdAfter],
        ['created_at < ?', q.createdBefore],
        ["json_extract(specification, '$.product.id') = ?", q.productId],
        ["json_extract(specification, '$.product.category') = ?", q.productCategory],
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
        sql(`select * from jobs ${clause} order by id ${order} limit ?`).all(...values, q.limit) as Row[]
      ).map(toJob);
    },
    activeJobs(): JobRecord[] {
      return (
        sql(
          "select * from jobs where state not in ('SUCCESS', 'FAILURE', 'EXPIRED') order by id",
        ).all() as Row[]
      ).map(toJob);
    },
    /** Running jobs only, from the partial index of active jobs: a queue backlog costs nothing here. */
    runningJobs(): JobRecord[] {
      return (sql("select * from jobs where state = 'RUNNING' order by id").all() as Row[]).map(toJob);
    },
    countByState(): Record<string, number> {
      const out: Record<string, number> = {};
      for (const r of sql('select state, count(*) as n from jobs group by state').all() as Row[]) {
        out[r.state as string] = Number(r.n);
      }
      return out;
    },

    // Idempotent submissions.
    idempotent(username: string, key: string): { requestHash: string; jobIds: string[] } | undefined {
      const r = sql('select request_hash, job_ids from idempotency where username = ? and key = ?').get(
        username,
        key,
      ) as Row | undefined;
      return (
        r && { requestHash: r.request_hash as string, jobIds: JSON.parse(r.job_ids as string) as string[] }
      );
    },
    rememberIdempotent(
      username: string,
      key: string,
      requestHash: string,
      jobIds: string[],
      now = Date.now(),
    ): void {
      sql(
        'insert into idempotency (username, key, request_hash, job_ids, created_at) values (?, ?, ?, ?, ?)',
      ).run(username, key, requestHash, JSON.stringify(jobIds), now);
    },

    // Interactive sessions, by the hash of their secret.
    insertSession(s: SessionRecord): void {
      sql(
        'insert into sessions (hash, kind, job_id, rank, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(s.hash, s.kind, s.jobId, s.rank, s.username, s.createdAt, s.lastUsedAt, s.expiresAt);
    },
    session(hash: string): SessionRecord | undefined {
      const r = sql('select * from sessions where hash = ?').get(hash) as Row | undefined;
      return r && toSession(r);
    },
    /** Removes the session and answers it, in one step: a one-time secret is used once. */
    takeSession(hash: string): SessionRecord | undefined {
      const r = sql('delete from sessions where hash = ? returning *').get(hash) as Row | undefined;
      return r && toSession(r);
    },
    touchSession(hash: string, at: number, expiresAt: number): void {
      sql('update sessions set last_used_at = ?, expires_at = ? where hash = ?').run(at, expiresAt, hash);
    },
    deleteSessionsOf(jobId: string): void {
      sql('delete from sessions where job_id = ?').run(jobId);
    },
    deleteExpiredSessions(at: number): void {
      sql('delete from sessions where expires_at <= ?').run(at);
    },

    // Web interface sessions and one-time sign-in links, by the hash of their secret.
    insertUiSession(s: UiSessionRecord): void {
      sql(
        'insert into ui_sessions (hash, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?)',
      ).run(s.hash, s.username, s.createdAt, s.lastUsedAt, s.expiresAt);
    },
    uiSession(hash: string): UiSessionRecord | undefined {
      const r = sql('select * from ui_sessions where hash = ?').get(hash) as Row | undefined;
      return (
        r && {
          hash: r.hash as string,
          username: r.username as string,
          createdAt: Number(r.created_at),
          lastUsedAt: Number(r.last_used_at),
          expiresAt: Number(r.expires_at),
        }
      );
    },
    touchUiSession(hash: string, at: number, expiresAt: number): void {
      sql('update ui_sessions set last_used_at = ?, expires_at = ? where hash = ?').run(at, expiresAt, hash);
    },
    deleteUiSession(hash: string): void {
      sql('delete from ui_sessions where hash = ?').run(hash);
    },
    insertSignInLink(hash: string, username: string, expiresAt: number): void {
      sql('insert into sign_in_links (hash, username, expires_at) values (?, ?, ?)').run(
        hash,
        username,
        expiresAt,
      );
    },
    /** Whose the link is, leaving it unused. */
    signInLink(hash: string): { username: string; expiresAt: number } | undefined {
      const r = sql('select * from sign_in_links where hash = ?').get(hash) as Row | undefined;
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    /** Removes the link and answers whose it was, in one step: a link signs in once. */
    takeSignInLink(hash: string): { username: string; expiresAt: number } | undefined {
      const r = sql('delete from sign_in_links where hash = ? returning *').get(hash) as Row | undefined;
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    /** Forgets expired web sessions and sign-in links. */
    deleteExpiredSignIns(at: number): void {
      sql('delete from ui_sessions where expires_at <= ?').run(at);
      sql('delete from sign_in_links where expires_at <= ?').run(at);
    },

    // Allocations and charges.
    grant(
      owner: string,
      category: string,
      credits: number,
      startAt: number,
      endAt: number,
      now = Date.now(),
    ): number {
      return Number(
        sql(
          'insert into allocations (owner, category, credits, start_at, end_at, created_at) values (?, ?, ?, ?, ?, ?)',
        ).run(owner, category, credits, startAt, endAt, now).lastInsertRowid,
      );
    },
    allocations(owner?: string): AllocationRecord[] {
      const rows = (
        owner === undefined
          ? sql('select * from allocations order by id').all()
          : sql('select * from allocations where owner = ? order by id').all(owner)
      ) as Row[];
      return rows.map(toAllocation);
    },
    activeAllocations,
    /**
     * Records a charge once (false when this charge id was already recorded: a retry) and draws it
     * from the owner's valid allocations, the soonest to end first; what none can cover is
     * drawn from the last one, which then shows a negative balance.
     */
    charge(c: ChargeRecord): boolean {
      return transaction(() => {
        const inserted =
          sql(
            `insert or ignore into charges (charge_id, job_id, owner, category, units, periods, credits, charged_at)
             values (?, ?, ?, ?, ?, ?, ?, ?)`,
          ).run(c.chargeId, c.jobId, c.owner, c.category, c.units, c.periods, c.credits, c.chargedAt)
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
    },
    charges(owner: string, from: number, to: number): ChargeRecord[] {
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

function outcomeOf(r: Row): Outcome {
  return {
    kind: r.outcome as OutcomeKind,
    ...(r.outcome_by !== null ? { by: r.outcome_by as string } : {}),
    ...(r.outcome_reason !== null ? { reason: r.outcome_reason as string } : {}),
  };
}

function toAllocation(r: Row): AllocationRecord {
  return {
    id: Number(r.id),
    owner: r.owner as string,
    category: r.category as string,
    credits: Number(r.credits),
    used: Number(r.used),
    startAt: Number(r.start_at),
    endAt: Number(r.end_at),
  };
}

export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

function migrate(db: DatabaseSync): void {
  db.exec('create table if not exists schema_version (version integer not null)');
  const row = db.prepare('select max(version) as v from schema_version').get() as { v: number | null };
  const current = row.v ?? 0;
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.exec('begin immediate');
    try {
      db.exec(MIGRATIONS[v]!);
      db.prepare('insert into schema_version (version) values (?)').run(v + 1);
      db.exec('commit');
    } catch (e) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL): a second rollback would throw and
      // hide the error that matters.
      if (db.isTransaction) db.exec('rollback');
      throw e;
    }
  }
}
