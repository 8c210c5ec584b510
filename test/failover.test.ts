/**
 * Three `ucompute serve` replicas on one PostgreSQL (the tests' own) and one Kubernetes API server
 * (the fake, its Volcano stand-in running every job to its end): clients submit to all of them
 * while the leader is killed (`kill -9`), then paused (`kill -STOP`) and resumed after another
 * took over. Nothing acknowledged is lost, nothing is created twice in the cluster or charged
 * twice, and the paused leader writes nothing once resumed, in the store or on the cluster.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type pg from 'pg';
import { volcanoJobName } from '../src/volcano/names.ts';
import { fakeCluster } from './support/fake-kube/cluster.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { leaderOtherThan, type Replica, type ReplicaSet, startReplicas } from './support/replicas.ts';
import { until } from './support/until.ts';

const job = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 1,
  parameters: {},
};

/**
 * Clients submitting one job per request, one request at a time each, to the replicas in turn
 * (those `targets` names); a job counts once a replica acknowledged it (200 with its id). They
 * send only while fewer than the jobs allowed (`allow`) are acknowledged or under way: the test
 * must be able to wait for every job to end, on a machine of any speed.
 */
function clients(set: ReplicaSet, count: number) {
  const acknowledged: string[] = [];
  /** The last answers other than an acknowledgement, for failures. */
  const refusals: string[] = [];
  const refused = (what: string) => {
    refusals.push(what);
    if (refusals.length > 5) refusals.shift();
  };
  let targets = [...set.replicas];
  const inFlight = new Map<Replica, number>();
  let stopped = false;
  let turn = 0;
  let allowed = 0;
  let sending = 0;
  /** Clients waiting for more jobs to be allowed (or the end). */
  let waiting: (() => void)[] = [];
  const wakeAll = () => {
    for (const wake of waiting) wake();
    waiting = [];
  };
  async function client(): Promise<void> {
    while (!stopped) {
      if (acknowledged.length + sending >= allowed) {
        await new Promise<void>((wake) => waiting.push(wake));
        continue;
      }
      sending++;
      const replica = targets[turn++ % targets.length]!;
      inFlight.set(replica, (inFlight.get(replica) ?? 0) + 1);
      try {
        const response = await fetch(`${replica.url}/api/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${set.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ items: [job] }),
          signal: AbortSignal.timeout(10_000),
        });
        if (response.status === 200) {
          const { responses } = (await response.json()) as { responses: { id: string }[] };
          acknowledged.push(...responses.map((r) => r.id));
        } else refused(`${replica.name}: ${response.status} ${(await response.text()).slice(0, 300)}`);
      } catch (error) {
        // Refused or unanswered (the replica was killed or paused): not acknowledged.
        refused(`${replica.name}: ${(error as Error).message}`);
      } finally {
        sending--;
        inFlight.set(replica, inFlight.get(replica)! - 1);
      }
    }
  }
  const running = Array.from({ length: count }, client);
  return {
    acknowledged,
    refusals,
    /** From now on requests go only to these replicas. */
    sendTo(replicas: Replica[]) {
      targets = replicas;
    },
    inFlightTo: (replica: Replica) => inFlight.get(replica) ?? 0,
    /** Allows `more` jobs beyond those acknowledged now. */
    allow(more: number) {
      allowed = acknowledged.length + more;
      wakeAll();
    },
    async stop() {
      stopped = true;
      wakeAll();
      await Promise.all(running);
    },
  };
}

/** Counts every row written, by the writing connection's application_name (the replica's name). */
async function recordWrites(db: pg.Client): Promise<void> {
  await db.query(`
    create table writes_seen (id bigserial primary key, writer text, tbl text);
    create function note_write() returns trigger language plpgsql as $$ begin
      insert into writes_seen (writer, tbl) values (current_setting('application_name'), tg_table_name);
      return null;
    end $$;`);
  const { rows } = await db.query(
    `select tablename from pg_tables where schemaname = 'public' and tablename <> 'writes_seen'`,
  );
  for (const { tablename } of rows as { tablename: string }[]) {
    await db.query(
      `create trigger note_write after insert or update or delete on "${tablename}"
       for each row execute function note_write()`,
    );
  }
}

/**
 * What the database holds of these jobs' run and charges, for a failure: each job's times and
 * counters, its charges and its updates (with their timestamps), and the lease.
 */
async function historyOf(db: pg.Client, ids: string[]): Promise<string> {
  const rows = async (sql: string) => JSON.stringify((await db.query(sql, [ids])).rows);
  return [
    `jobs: ${await rows(
      `select id, state, started_at, run_started_at, time_run_before_ms, charged_periods, credits_charged
       from jobs where id = any($1)`,
    )}`,
    `charges: ${await rows(
      'select job_id, charge_id, first_period, periods, charged_at from charges where job_id = any($1) order by charged_at',
    )}`,
    `updates: ${await rows(
      `select job_id, seq, body::jsonb ->> 'state' as state, body::jsonb ->> 'status' as status,
       body::jsonb ->> 'timestamp' as at from job_updates where job_id = any($1) order by job_id, seq`,
    )}`,
    `lease: ${JSON.stringify((await db.query('select * from leases')).rows)}`,
  ].join('\n');
}

/**
 * Samples, every second while `waiting` answers true (at most `samples` times), what the
 * database's sessions do that are not idle: which replica, its state, what it waits for, since
 * when its transaction runs, its statement. Shown when a takeover is slow, to say what held it.
 */
async function activityWhile(db: pg.Client, waiting: () => boolean, samples = 60): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < samples && waiting(); i++) {
    const { rows } = await db.query(
      `select application_name as who, state, wait_event_type || ':' || wait_event as waits,
         round(extract(epoch from clock_timestamp() - xact_start)) as xact_s, left(query, 90) as query
       from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle'`,
    );
    seen.push(`${new Date().toISOString()} ${JSON.stringify(rows)}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return seen;
}

const count = async (db: pg.Client, sql: string, ...values: unknown[]) =>
  Number(((await db.query(sql, values)).rows[0] as { n: string }).n);

test('three replicas on one PostgreSQL: the leader killed, then paused, loses nothing and doubles nothing', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
  timeout: 600_000,
}, async (t) => {
  const cluster = await fakeCluster(t, { autopilot: true, stepMs: 200 });
  const created = new Map<string, number>();
  cluster.api.onChange((type, plural, object) => {
    if (type !== 'ADDED' || plural !== 'jobs') return;
    const name = object.metadata.name as string;
    created.set(name, (created.get(name) ?? 0) + 1);
  });
  // `ucompute serve`'s own lease time (15 s), renewed every 0.5 s: the tests' 6-s lease was lost
  // by a new leader that renewed nothing for 5.5 s at a load of 40 on 2 cores (its successor had
  // been killed, so no replica was left); a lease this test can lose to a machine's pause says
  // nothing about the code. A takeover now waits up to 15 s after the kill -9 and the kill -STOP.
  const set = await startReplicas(t, cluster, await newPostgresDatabase(), 3, {
    lease: { leaseSeconds: 15, renewSeconds: 0.5 },
  });
  const { db } = set;
  await recordWrites(db);
  const load = clients(set, 4);
  t.after(() => load.stop());
  // Each phase allows tens of jobs: at each kill, jobs acknowledged and not yet ended, and more
  // sent across it (150 a run). Twice as many (270) cost a third more CPU; a fault in a few % of
  // the jobs, as 9b3eee0's 4 % that ended FAILURE after a takeover, still shows in 150.
  load.allow(50);
  /** A failed wait says what the clients were last answered and what the replicas said. */
  const explained = <T>(waiting: Promise<T>, more = () => ''): Promise<T> =>
    waiting.catch((error: Error) => {
      const said = set.replicas.map((r) => `${r.name}: ${r.output()}`).join('\n');
      throw new Error(
        `${error.message}\n${more()}\nclients were answered: ${load.refusals.join(' | ')}\n${said}`,
      );
    });
  const succeeded = () => count(db, `select count(*) as n from jobs where state = 'SUCCESS'`);
  /** Allows `more` jobs and waits until they are acknowledged. */
  const moreAcknowledged = (more: number, what: string) => {
    const atLeast = load.acknowledged.length + more;
    load.allow(more);
    return explained(until(() => load.acknowledged.length >= atLeast, { describe: what, timeout: 120_000 }));
  };

  // kill -9 of the leader, under load.
  await explained(
    until(async () => (await succeeded()) >= 10, { describe: '10 jobs succeeded', timeout: 120_000 }),
  );
  const first = await leaderOtherThan(set, undefined);
  load.allow(40);
  first.replica.child.kill('SIGKILL');
  const killedAt = performance.now();
  load.sendTo(set.replicas.filter((r) => r !== first.replica));
  const second = await leaderOtherThan(set, first.replica);
  const takeoverMs = performance.now() - killedAt;
  t.diagnostic(
    `kill -9: ${second.replica.name} leads (epoch ${second.epoch}) ${Math.round(takeoverMs)} ms after`,
  );
  assert.ok(second.epoch > first.epoch);
  await moreAcknowledged(20, '20 more jobs acknowledged after the kill');

  // kill -STOP of the new leader: the last replica takes over; resumed, the paused one writes nothing.
  const third = set.replicas.find((r) => r !== first.replica && r !== second.replica)!;
  load.sendTo([third]);
  load.allow(30);
  await explained(
    until(() => load.inFlightTo(second.replica) === 0, {
      describe: `no request to ${second.replica.name} under way`,
      timeout: 30_000,
    }),
  );
  second.replica.child.kill('SIGSTOP');
  const pausedAt = performance.now();
  let takenOver = false;
  const activity = activityWhile(set.db, () => !takenOver);
  const takeover = await leaderOtherThan(set, second.replica).finally(() => {
    takenOver = true;
  });
  const pauseTakeoverMs = performance.now() - pausedAt;
  t.diagnostic(
    `kill -STOP: ${takeover.replica.name} leads (epoch ${takeover.epoch}) ${Math.round(pauseTakeoverMs)} ms after`,
  );
  // The lease lasts 15 s here; a takeover much later than that was held by something: say what.
  if (pauseTakeoverMs > 25_000)
    t.diagnostic(`sessions while it was awaited:\n${(await activity).join('\n')}`);
  else await activity;
  assert.equal(takeover.replica, third);
  const mark = await count(db, 'select coalesce(max(id), 0) as n from writes_seen');
  await moreAcknowledged(10, '10 more jobs acknowledged after the pause');
  const callsBeforeResume = cluster.api.calls.length;
  second.replica.child.kill('SIGCONT');
  // Resumed, it finds the lease taken and exits (as a client-go controller does).
  const { child } = second.replica;
  const exit = await explained(
    until(() => (child.exitCode === null ? child.signalCode : String(child.exitCode)), {
      describe: `${second.replica.name} exited once resumed`,
      timeout: 60_000,
    }),
  );
  assert.equal(exit, '1', second.replica.output());
  const writesByPaused = await count(
    db,
    'select count(*) as n from writes_seen where writer = $1 and id > $2',
    second.replica.name,
    mark,
  );
  assert.equal(writesByPaused, 0, 'rows written by the paused leader after the takeover');
  // Nor on the cluster: what it decided before the pause and had not sent (held in the client's
  // rate limiter: creates, removals of ended jobs) is not sent once resumed.
  const byPaused = cluster.api.calls.slice(callsBeforeResume).filter((c) => c.token === second.replica.name);
  t.diagnostic(`the paused leader, resumed: ${byPaused.length} API calls`);
  assert.deepEqual(
    byPaused.filter((c) => !['get', 'list', 'watch'].includes(c.verb)),
    [],
    'creates, changes and deletions on the cluster by the paused leader once resumed',
  );

  await load.stop();
  const acknowledged = [...load.acknowledged];
  t.diagnostic(`${acknowledged.length} jobs acknowledged`);
  let unfinished: unknown[] = [];
  await explained(
    until(
      async () => {
        const { rows } = await db.query(
          `select j.state, j.submitted, u.body::jsonb ->> 'status' as status, count(*) as n,
           min(j.id) as example
         from jobs j join job_updates u on u.job_id = j.id and u.seq = j.update_count - 1
         where j.id = any($1) and j.state <> 'SUCCESS' group by 1, 2, 3`,
          [acknowledged],
        );
        unfinished = rows;
        return rows.length === 0;
      },
      { describe: 'every acknowledged job succeeded', timeout: 180_000 },
    ),
    () => JSON.stringify(unfinished),
  );
  // 0 lost: each acknowledged job is stored (and succeeded, above).
  assert.equal(
    await count(db, 'select count(*) as n from jobs where id = any($1)', acknowledged),
    acknowledged.length,
  );
  // 0 submitted twice: each job's Volcano Job was created once.
  const twice = acknowledged.filter((id) => created.get(volcanoJobName(id)) !== 1);
  assert.deepEqual(
    twice.map((id) => [id, created.get(volcanoJobName(id)) ?? 0]),
    [],
    'jobs not created exactly once in the cluster',
  );
  // 0 charged twice: each job ran well under a period, so it is charged at most that one period,
  // once (a job whose run the leader never saw — it ended between two looks — is charged nothing).
  const charged = await db.query(
    `select j.id, count(c.charge_id) as n, coalesce(sum(c.periods), 0) as periods from jobs j
       left join charges c on c.job_id = j.id where j.id = any($1) group by j.id`,
    [acknowledged],
  );
  const rows = charged.rows as { id: string; n: string; periods: string }[];
  t.diagnostic(`${rows.filter((r) => r.n === '1').length} of ${rows.length} jobs charged (once)`);
  const overcharged = rows.filter((r) => Number(r.n) > 1 || Number(r.periods) > 1);
  const history =
    overcharged.length > 0
      ? await historyOf(
          db,
          overcharged.map((r) => r.id),
        )
      : '';
  assert.deepEqual(overcharged, [], `jobs charged twice:\n${history}`);
});
