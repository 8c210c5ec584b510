/**
 * The highly available deployment (issue 21), in one run:
 *
 * 1. Accepted single-item jobs per second and acceptance latency (p50, p99) through `POST
 *    /api/jobs`, from `--connections` client connections spread evenly over the replicas: SQLite
 *    (one process: SQLite serves one process, it cannot be shared by replicas), then PostgreSQL with
 *    1, 2 and 3 replicas on one database. Every case has a fresh database and the dry backend, so the
 *    figures are the API's and the store's alone (the leader's loop runs the accepted jobs meanwhile).
 *    The load comes from wrk (Debian package `wrk`), one process per replica; the p50/p99 over all
 *    requests are merged from each wrk's percentiles (0.1 % steps, weighted by its requests).
 * 2. Time to a new leader after `kill -9` of the leader, `--kills` times, three replicas on the fake
 *    Kubernetes API server with `ucompute serve`'s default lease (15 s, renewed every 2 s). Two facts
 *    are timed from the kill: the lease row taken by another live replica with a higher epoch, and a
 *    job accepted by a follower just after the kill created as a Volcano Job (the new leader acts).
 *    The killed replica is started again in its place (as Kubernetes restarts a pod) before the next.
 *
 * 3. With `--statements`: statements per accepted job, PostgreSQL with 3 replicas under the same load
 *    for `--seconds`, counted in PostgreSQL's statement log (`log_statement = all` on the case's
 *    database) from the load's start until every accepted job has ended (so the leader's work for
 *    them is in; with `--accept-only`, until the load ends), by kind. A separate case: logging every
 *    statement slows PostgreSQL.
 *
 * With `--owners N` (N > 1), the jobs of every case are submitted by N users, each with its own
 * credits, in turn request by request (made through the admin API before the load): an intake
 * flush locks its owners' allocations until it commits, so one owner's submissions, whichever
 * replica takes them, commit one after the other; a platform's many users' do not.
 *
 * With `--waits`, what the case database's backends do during the timed load of each PostgreSQL
 * case, sampled every 10 ms from pg_stat_activity: the mean number of backends on the CPU, waiting
 * for a lock (the job events lock is Lock:advisory, NOTIFY's Lock:object), for the WAL's sync, idle
 * in a transaction (waiting for their client) … (the sampler's backend is in PostgreSQL's CPU).
 *
 * With `--tables`, what PostgreSQL does per job in each PostgreSQL case, from before its warm-up until
 * all its jobs have ended: rows inserted, updated (HOT or not) and deleted per table, and each
 * statement's calls, rows, time, buffers and WAL (pg_stat_statements, preloaded): bench/postgres-work.ts.
 *
 * With `--accept-only`, the PostgreSQL cases take the lease from their leader once it holds it (a
 * holder that is no replica, for longer than the run): no replica runs the leader's loop, and the
 * figures are those of acceptance alone, its ceiling on this machine. With `--cpu-prof DIR`, every
 * replica of each PostgreSQL case writes a V8 CPU profile there (ended by SIGTERM after its case).
 *
 * With the leader running, the load starts once the warm-up's jobs have ended, and its jobs are
 * waited for after it: the leader can lag behind acceptance (then it does its part after the
 * load). Printed: the jobs not yet submitted and not ended at the load's end, the seconds until
 * every job had ended, how long the load's jobs waited from acceptance to running (p50, p99), the
 * CPU per job of each process and PostgreSQL from the load's start until then, and after the load
 * alone (the leader's work by itself, with its jobs ended per second); each replica's own p50/p99.
 *
 * Every case also splits the CPU per accepted job by process: each replica's main thread and its
 * other threads (V8's GC and compiler, libuv's pool), PostgreSQL (postmaster and backends), and the
 * load generator (every wrk, read from its shell's waited-children times): what is ours and what
 * is the generator's on the same cores.
 *
 *   node bench/ha.bench.ts [--seconds 10] [--connections 16] [--kills 10] [--skip-kills] [--statements]
 *     [--replicas 1,2,3]   (the PostgreSQL cases run; '' for none) [--accept-only] [--cpu-prof DIR]
 *     [--waits] [--owners 1] [--tables]
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { volcanoJobName } from '../src/volcano/names.ts';
import { fakeCluster } from '../test/support/fake-kube/cluster.ts';
import { newPostgresDatabase, postgresLog, postgresSettings } from '../test/support/postgres.ts';
import { leaderOtherThan, type Replica, type ReplicaSet, startReplicas } from '../test/support/replicas.ts';
import { serving, spawnServe } from '../test/support/serve.ts';
import { until } from '../test/support/until.ts';
import { postgresWork } from './postgres-work.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '16' },
    kills: { type: 'string', default: '10' },
    'skip-kills': { type: 'boolean', default: false },
    statements: { type: 'boolean', default: false },
    replicas: { type: 'string', default: '1,2,3' },
    'accept-only': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    waits: { type: 'boolean', default: false },
    owners: { type: 'string', default: '1' },
    tables: { type: 'boolean', default: false },
  },
});
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const KILLS = Number(values.kills);
const OWNERS = Number(values.owners);
if (values.tables)
  postgresSettings({ shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' });

const job = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 1,
  parameters: {},
};
/**
 * What every server is configured with: credits for every job of the run, root apps (mpi-hello runs
 * as root), and `ucompute serve`'s own monitor interval (undefined is left out of the file).
 */
const CONFIG = {
  accounting: { initialCredits: 1_000_000_000 },
  security: { allowRootApps: true },
  monitorIntervalMs: undefined,
};

/** Cleanups, run at the end (the replica helpers register theirs here). */
const cleanups: (() => unknown)[] = [];
const scope = { after: (cleanup: () => unknown) => void cleanups.push(cleanup) };
const work = await mkdtemp(join(tmpdir(), 'ucompute-ha-bench-'));
scope.after(() => rm(work, { recursive: true, force: true }));

const loadAverage = async () => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
/** CPU time (user + system) a process has used, in ms; 0 once it is gone. */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (stat === '') return 0;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
/** A process's CPU (ms) in two parts: its main thread, and every other thread (V8's, libuv's, workers). */
async function threadsCpuMs(pid: number): Promise<{ main: number; others: number }> {
  const tids = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  let [main, others] = [0, 0];
  for (const tid of tids) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (stat === '') continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
    if (Number(tid) === pid) main += ms;
    else others += ms;
  }
  return { main, others };
}
/** PostgreSQL's CPU: its postmaster (this process's child, started by the test helper) and its backends. */
async function postgresCpuMs(): Promise<number> {
  const children = (pid: number) =>
    readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').then(
      (text) => text.split(' ').filter(Boolean).map(Number),
      () => [] as number[],
    );
  let total = 0;
  for (const pid of await children(process.pid)) {
    const comm = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
    if (comm !== 'postgres') continue;
    total += await cpuMs(pid);
    for (const backend of await children(pid)) total += await cpuMs(backend);
  }
  return total;
}

interface WrkResult {
  requests: number;
  failures: number;
  seconds: number;
  /** The CPU (user + system, ms) the wrk process used. */
  cpuMs: number;
  /** Latencies (ms) at 0.1 %, 0.2 % … 100 %. */
  quantiles: number[];
}

/** wrk against one replica: `connections` connections, one thread, single-item submissions. */
async function wrk(url: string, tokens: string[], connections: number, seconds: number): Promise<WrkResult> {
  const token = tokens[0]!;
  const script = join(work, 'post.lua');
  await writeFile(
    script,
    [
      'wrk.method = "POST"',
      'wrk.headers["Content-Type"] = "application/json"',
      `wrk.headers["Authorization"] = "Bearer ${token}"`,
      `wrk.body = [[${JSON.stringify({ items: [job] })}]]`,
      // Several owners: each request as the next one (the requests made once, in init).
      ...(tokens.length > 1
        ? [
            `local tokens = {${tokens.map((t) => `"${t}"`).join(', ')}}`,
            'local requests = {}',
            'local k = 0',
            'init = function(args)',
            '  for i, t in ipairs(tokens) do',
            '    requests[i] = wrk.format(nil, nil, {["Host"] = wrk.headers["Host"], ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. t})',
            '  end',
            'end',
            'request = function()',
            '  k = k % #requests + 1',
            '  return requests[k]',
            'end',
          ]
        : []),
      // The first answer that is not a 2xx, whole (up to 500 bytes): why a replica refused.
      'local told = false',
      'response = function(status, headers, body)',
      '  if status >= 300 and not told then',
      '    told = true',
      '    io.write(string.format("FIRST %d %s\\n", status, string.sub(body or "", 1, 500):gsub("\\n", " ")))',
      '  end',
      'end',
      'done = function(summary, latency, requests)',
      '  local e = summary.errors',
      '  io.write(string.format("RESULT %d %d %d\\n", summary.requests,',
      '    e.status + e.connect + e.read + e.write + e.timeout, summary.duration))',
      '  for i = 1, 1000 do io.write(string.format("Q %d\\n", latency:percentile(i / 10))) end',
      'end',
      '',
    ].join('\n'),
  );
  const out = await new Promise<string>((resolve, reject) => {
    const args = [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      script,
      `${url}/api/jobs`,
    ];
    // Under sh, which then prints its own stat: its children's times (cutime, cstime) are wrk's.
    const shell = 'wrk "$@"; s=$?; echo "SHELL $(cat /proc/$$/stat)"; exit $s';
    execFile('sh', ['-c', shell, 'sh', ...args], { maxBuffer: 1 << 22 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
  const result = /RESULT (\d+) (\d+) (\d+)/.exec(out);
  if (!result) {
    // What a request is answered now, to say why.
    const answer = await fetch(`${url}/api/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [job] }),
    }).then(
      async (r) => `${r.status} ${(await r.text()).slice(0, 500)}`,
      (e: unknown) => String(e),
    );
    throw new Error(`wrk said: ${out}\na request now: ${answer}`);
  }
  const first = /^FIRST (.*)$/m.exec(out);
  if (first) console.log(`${url}: the first answer that was not a 2xx: ${first[1]}`);
  return {
    requests: Number(result[1]),
    failures: Number(result[2]),
    seconds: Number(result[3]) / 1e6,
    cpuMs: (() => {
      const stat = /^SHELL (.*)$/m.exec(out)?.[1] ?? '';
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return ((Number(fields[13]) + Number(fields[14])) * 1000) / CLOCK_TICKS;
    })(),
    quantiles: [...out.matchAll(/^Q (\d+)$/gm)].map((m) => Number(m[1]) / 1000),
  };
}

/**
 * The tokens of the `--owners` users the load submits as: the admin's alone for one; else users
 * `bench1` … made through the admin API at `url`, each granted credits for the run's jobs.
 */
async function ownerTokens(url: string, admin: string): Promise<string[]> {
  if (OWNERS <= 1) return [admin];
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<{ token?: string }>;
  };
  const tokens: string[] = [];
  for (let i = 1; i <= OWNERS; i++) {
    await post('/api/admin/users', { name: `bench${i}` });
    await post('/api/accounting/allocations', {
      owner: `user:bench${i}`,
      category: job.product.category,
      credits: CONFIG.accounting.initialCredits,
    });
    tokens.push((await post('/api/admin/tokens', { username: `bench${i}`, description: 'ha.bench' })).token!);
  }
  return tokens;
}

/** The latency at quantile `q` of all requests, each wrk's quantiles weighted by its requests. */
function merged(results: WrkResult[], q: number): number {
  const points = results
    .flatMap((r) => r.quantiles.map((ms) => ({ ms, weight: r.requests / r.quantiles.length })))
    .sort((a, b) => a.ms - b.ms);
  const total = points.reduce((sum, p) => sum + p.weight, 0);
  let seen = 0;
  for (const p of points) {
    seen += p.weight;
    if (seen >= q * total) return p.ms;
  }
  return points.at(-1)?.ms ?? Number.NaN;
}

interface Case {
  name: string;
  jobsPerSecond: number;
  p50: number;
  p99: number;
  /** Each replica's own p50 / p99 (its wrk's requests), in the order of the urls (leader first). */
  eachLatency: { p50: number; p99: number }[];
  requests: number;
  failures: number;
  replicaCpuMsPerJob: number;
  /** Each process's CPU ms per accepted job, in the order of `pids`. */
  perProcess: number[];
  /** The same, less what each used per second without load (lease, timers) over the load's time. */
  perProcessNet: number[];
  postgresNet: number;
  postgresCpuMsPerJob: number;
  /** Each process's main thread and other threads, CPU ms per accepted job. */
  threads: { main: number; others: number }[];
  /** The load generator's (every wrk's) CPU ms per accepted job. */
  wrkCpuMsPerJob: number;
  load: string;
  /**
   * With the leader running: the jobs not yet submitted and not ended when the load ended, the
   * seconds until all had ended, and the CPU ms per job of each process and PostgreSQL from the
   * load's start until then (all of the leader's work for the load's jobs).
   */
  left?: {
    unsubmitted: number;
    active: number;
    seconds: number;
    /** How long the load's jobs waited from their acceptance to running: p50 and p99, ms. */
    startP50: number;
    startP99: number;
    perProcess: number[];
    postgres: number;
    /** The same from the load's end on, per job not ended then: the leader's work alone. */
    afterLoad: number[];
    postgresAfterLoad: number;
  };
  /** With --waits: the mean number of backends per state and wait during the load, most first. */
  waits?: [string, number][];
  /** With --tables: PostgreSQL's rows and statements per job (postgres-work.ts), as Markdown. */
  tables?: string;
}

/**
 * What the backends of the database at `url` do while `during` runs, sampled every 10 ms: the mean
 * number per state and wait event over the samples (idle ones left out), most first.
 */
async function backendsDuring<T>(url: string, during: Promise<T>): Promise<[T, [string, number][]]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const counts = new Map<string, number>();
  let samples = 0;
  let done = false;
  const result = during.finally(() => {
    done = true;
  });
  try {
    // Bounded: at most one sample per 10 ms over the case's seconds and a margin.
    for (let i = 0; !done && i < (SECONDS + 30) * 100; i++) {
      const { rows } = await client.query<{ what: string; n: number }>(
        `select case when state = 'active' then coalesce(wait_event_type || ':' || wait_event, 'active, on the CPU')
                     else state || coalesce(' (' || wait_event || ')', '') end as what, count(*)::int as n
         from pg_stat_activity
         where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'
           and state <> 'idle'
         group by 1`,
      );
      samples++;
      for (const r of rows) counts.set(r.what, (counts.get(r.what) ?? 0) + r.n);
      await new Promise((r) => setTimeout(r, 10));
    }
    return [
      await result,
      [...counts].map(([what, n]) => [what, n / samples] as [string, number]).sort((a, b) => b[1] - a[1]),
    ];
  } finally {
    await client.end();
  }
}

/** The jobs of the database at `url` not handed to the backend yet, and those not ended. */
async function backlog(client: pg.Client): Promise<{ unsubmitted: number; active: number }> {
  const { rows } = await client.query<{ unsubmitted: number; active: number }>(
    `select count(*) filter (where state = 'IN_QUEUE' and submitted = 0)::int as unsubmitted,
       count(*) filter (where state not in ('SUCCESS', 'FAILURE', 'EXPIRED'))::int as active from jobs`,
  );
  return rows[0]!;
}

/** How long the jobs accepted from `from` on waited from their acceptance to running: p50 and p99, ms. */
async function startDelays(client: pg.Client, from: number): Promise<{ startP50: number; startP99: number }> {
  const { rows } = await client.query<{ q: number[] }>(
    `select percentile_cont(array[0.5, 0.99]) within group (order by started_at - created_at) as q
     from jobs where created_at >= $1 and started_at is not null`,
    [from],
  );
  return { startP50: rows[0]!.q[0]!, startP99: rows[0]!.q[1]! };
}

/** Waits (120 s at most) until every job of the database has ended; answers the seconds waited. */
async function allEnded(client: pg.Client): Promise<number> {
  const start = performance.now();
  while ((await backlog(client)).active > 0 && performance.now() - start < 120_000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return (performance.now() - start) / 1000;
}

/** Warm-up, then the timed load over `urls` (connections split evenly), with the CPU it cost. */
async function measure(
  name: string,
  urls: string[],
  pids: number[],
  token: string,
  database?: string,
): Promise<Case> {
  const tokens = await ownerTokens(urls[0]!, token);
  const split = (i: number) =>
    Math.floor(CONNECTIONS / urls.length) + (i < CONNECTIONS % urls.length ? 1 : 0);
  const cpu = () => Promise.all(pids.map(cpuMs));
  // What each process uses without load (per second, over 3 s): the followers' lease asks, the
  // leader's renewals and monitor passes, timers. At a few jobs/s it is a large part of a job's CPU.
  const [idle0, postgresIdle0] = [await cpu(), await postgresCpuMs()];
  const idleStart = performance.now();
  await new Promise((r) => setTimeout(r, 3000));
  const [idle1, postgresIdle1] = [await cpu(), await postgresCpuMs()];
  const idleSeconds = (performance.now() - idleStart) / 1000;
  const idlePerSecond = idle1.map((after, i) => (after - idle0[i]!) / idleSeconds);
  const postgresIdlePerSecond = (postgresIdle1 - postgresIdle0) / idleSeconds;
  await Promise.all(urls.map((url, i) => wrk(url, tokens, split(i), 2)));
  // With the leader running, the load starts once the warm-up's jobs have ended, and its jobs are
  // waited for after it: the leader may lag behind acceptance, and do its part after the load.
  const leading = database !== undefined && !values['accept-only'];
  const db = leading ? new pg.Client({ connectionString: database }) : undefined;
  await db?.connect();
  if (db) await allEnded(db);
  const threads = () => Promise.all(pids.map(threadsCpuMs));
  const [each0, postgresBefore, threads0] = [await cpu(), await postgresCpuMs(), await threads()];
  const loadStart = Date.now();
  const load = Promise.all(urls.map((url, i) => wrk(url, tokens, split(i), SECONDS)));
  const [results, waits] = database && values.waits ? await backendsDuring(database, load) : [await load];
  const [each1, postgresAfter, threads1] = [await cpu(), await postgresCpuMs(), await threads()];
  const left = db && {
    ...(await backlog(db)),
    seconds: await allEnded(db),
    ...(await startDelays(db, loadStart)),
  };
  const [each2, postgresDrained] = [await cpu(), await postgresCpuMs()];
  await db?.end();
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const [replicasBefore, replicasAfter] = [sum(each0), sum(each1)];
  const requests = results.reduce((sum, r) => sum + r.requests, 0);
  const failures = results.reduce((sum, r) => sum + r.failures, 0);
  const accepted = requests - failures;
  return {
    name,
    jobsPerSecond: accepted / Math.max(...results.map((r) => r.seconds)),
    p50: merged(results, 0.5),
    p99: merged(results, 0.99),
    eachLatency: results.map((r) => ({ p50: merged([r], 0.5), p99: merged([r], 0.99) })),
    requests,
    failures,
    replicaCpuMsPerJob: (replicasAfter - replicasBefore) / accepted,
    perProcess: each1.map((after, i) => (after - each0[i]!) / accepted),
    postgresNet:
      (postgresAfter - postgresBefore - postgresIdlePerSecond * Math.max(...results.map((r) => r.seconds))) /
      accepted,
    perProcessNet: each1.map(
      (after, i) =>
        (after - each0[i]! - idlePerSecond[i]! * Math.max(...results.map((r) => r.seconds))) / accepted,
    ),
    postgresCpuMsPerJob: (postgresAfter - postgresBefore) / accepted,
    threads: threads1.map((t, i) => ({
      main: (t.main - threads0[i]!.main) / accepted,
      others: (t.others - threads0[i]!.others) / accepted,
    })),
    wrkCpuMsPerJob: results.reduce((sum, r) => sum + r.cpuMs, 0) / accepted,
    load: await loadAverage(),
    ...(left
      ? {
          left: {
            ...left,
            perProcess: each2.map((after, i) => (after - each0[i]!) / accepted),
            postgres: (postgresDrained - postgresBefore) / accepted,
            afterLoad: each2.map((after, i) => (after - each1[i]!) / left.active),
            postgresAfterLoad: (postgresDrained - postgresAfter) / left.active,
          },
        }
      : {}),
    ...(waits ? { waits } : {}),
  };
}

async function sqliteCase(): Promise<Case> {
  const dir = await mkdtemp(join(work, 'sqlite-'));
  await writeFile(join(dir, 'config.yml'), JSON.stringify(CONFIG));
  const child = spawnServe(['--config', join(dir, 'config.yml'), '--data-dir', dir]);
  try {
    const url = await serving(child);
    const token = (await readFile(join(dir, 'admin.token'), 'utf8')).trim();
    return await measure('SQLite, 1 process', [url], [child.pid!], token);
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * No replica leads from now on: the lease is held, fenced (epoch raised), by a holder that is none
 * of them. The leader that lost it exits (as it would in production) and is started again.
 */
async function takeLease(set: ReplicaSet): Promise<void> {
  const { replica } = await leaderOtherThan(set, undefined);
  await set.db.query(
    `update leases set holder = 'ha-bench/0/accept-only', epoch = epoch + 1, expires_at = $1
     where name = 'backend'`,
    [Date.now() + 86_400_000],
  );
  await replica.exited;
  await set.replace(replica);
}

async function postgresCase(count: number): Promise<Case> {
  const mine: (() => unknown)[] = [];
  const profile = values['cpu-prof'];
  const database = await newPostgresDatabase();
  const set = await startReplicas(
    { after: (cleanup) => void mine.push(cleanup) },
    undefined,
    database,
    count,
    {
      lease: null,
      config: CONFIG,
      env: profile ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profile}` } : {},
    },
  );
  let leader: Awaited<ReturnType<ReplicaSet['leader']>>;
  try {
    if (values['accept-only']) await takeLease(set);
    else leader = (await leaderOtherThan(set, undefined)) ?? undefined;
    // The leader first: its CPU per job is reported first.
    const replicas = [...set.replicas].sort(
      (a, b) => Number(b === leader?.replica) - Number(a === leader?.replica),
    );
    const work = values.tables ? await postgresWork(database) : undefined;
    const measured = await measure(
      `PostgreSQL, ${count} replica${count > 1 ? 's' : ''}${values['accept-only'] ? ', acceptance alone' : ''}`,
      replicas.map((r) => r.url),
      replicas.map((r) => r.child.pid!),
      set.token,
      database,
    );
    return { ...measured, ...(work ? { tables: await work.done() } : {}) };
  } finally {
    // The profile is written as the process exits by itself.
    if (profile) {
      for (const r of set.replicas) {
        console.error(
          `profile of ${r.name} (pid ${r.child.pid}${r === leader?.replica ? ', the leader' : ''}) in ${profile}`,
        );
        r.child.kill('SIGTERM');
      }
      await Promise.all(set.replicas.map((r) => r.exited));
    }
    for (const cleanup of mine.reverse()) await cleanup();
  }
}

/** Statements per accepted job with 3 replicas (see the header), in all and by kind, most first. */
async function statementsCase(): Promise<{ accepted: number; total: number; kinds: [string, number][] }> {
  const url = await newPostgresDatabase();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const mine: (() => unknown)[] = [() => client.end()];
  try {
    await client.query(`alter database ${new URL(url).pathname.slice(1)} set log_statement = 'all'`);
    const set = await startReplicas({ after: (c) => void mine.push(c) }, undefined, url, 3, {
      lease: null,
      config: CONFIG,
    });
    if (values['accept-only']) await takeLease(set);
    const log = await postgresLog();
    const from = (await readFile(log)).length;
    const split = (i: number) => Math.floor(CONNECTIONS / 3) + (i < CONNECTIONS % 3 ? 1 : 0);
    const tokens = await ownerTokens(set.replicas[0]!.url, set.token);
    await Promise.all(set.replicas.map((r, i) => wrk(r.url, tokens, split(i), SECONDS)));
    const active = async () =>
      Number(
        (
          await client.query(
            "select count(*) as n from jobs where state not in ('SUCCESS', 'FAILURE', 'EXPIRED')",
          )
        ).rows[0].n,
      );
    if (!values['accept-only'])
      await until(async () => (await active()) === 0, {
        describe: 'every accepted job ended',
        timeout: 300_000,
      });
    const accepted = Number((await client.query('select count(*) as n from jobs')).rows[0].n);
    const text = (await readFile(log)).subarray(from).toString('utf8');
    const kinds = new Map<string, number>();
    // Statements prepared in simple queries (database.ts, simpleOn) by name: each EXECUTE is
    // counted under its statement's text, not its values.
    const named = new Map<string, string>();
    for (const m of text.matchAll(/prepare (ucs\d+_\d+) as (.{0,50})/g)) named.set(m[1]!, m[2]!);
    let total = 0;
    for (const m of text.matchAll(/LOG: {2}(?:statement|execute [^:]*): (.*)/g)) {
      total++;
      const kind = m[1]!
        .replace(/\s+/g, ' ')
        .replace(
          /execute (ucs\d+_\d+)\((?:'(?:[^']|'')*'|[^()';])*\)/g,
          (_, name: string) => `execute [${named.get(name) ?? name}]`,
        )
        .slice(0, 100);
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
    return { accepted, total, kinds: [...kinds].sort((a, b) => b[1] - a[1]) };
  } finally {
    for (const cleanup of mine.reverse()) await cleanup();
  }
}

/** The middle value (the lower of the two middle ones for an even count). */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? Number.NaN;

/** `KILLS` kills of the leader of three replicas on the fake cluster; the times to the two facts, in ms. */
async function kills(): Promise<{ lease: number[]; acting: number[] }> {
  const cluster = await fakeCluster(scope, { autopilot: true, stepMs: 200 });
  const created = new Set<string>();
  cluster.api.onChange((type, plural, object) => {
    if (type === 'ADDED' && plural === 'jobs') created.add(object.metadata.name as string);
  });
  const set = await startReplicas(scope, cluster, await newPostgresDatabase(), 3, {
    lease: null,
    config: CONFIG,
  });
  const submit = async (replica: Replica): Promise<string> => {
    const response = await fetch(`${replica.url}/api/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${set.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [job] }),
      signal: AbortSignal.timeout(30_000),
    });
    if (response.status !== 200)
      throw new Error(`${replica.name}: ${response.status} ${await response.text()}`);
    return ((await response.json()) as { responses: { id: string }[] }).responses[0]!.id;
  };
  const createdInCluster = (id: string, timeout: number) =>
    until(() => created.has(volcanoJobName(id)), { describe: `job ${id} created in the cluster`, timeout });
  const times = { lease: [] as number[], acting: [] as number[] };
  for (let i = 0; i < KILLS; i++) {
    // A leader that acts: a job accepted now reaches the cluster.
    const leader = await leaderOtherThan(set, undefined, 120_000);
    await createdInCluster(await submit(leader.replica), 120_000);
    leader.replica.child.kill('SIGKILL');
    const killedAt = performance.now();
    const follower = set.replicas.find((r) => r !== leader.replica)!;
    const probe = await submit(follower);
    const next = await leaderOtherThan(set, leader.replica, 120_000);
    times.lease.push(performance.now() - killedAt);
    if (next.epoch <= leader.epoch) throw new Error(`epoch ${next.epoch} after ${leader.epoch}`);
    await createdInCluster(probe, 120_000);
    times.acting.push(performance.now() - killedAt);
    console.error(
      `kill ${i + 1}: ${leader.replica.name} (epoch ${leader.epoch}) -> ${next.replica.name} (epoch ` +
        `${next.epoch}): lease ${(times.lease.at(-1)! / 1000).toFixed(1)} s, acting ` +
        `${(times.acting.at(-1)! / 1000).toFixed(1)} s; load ${await loadAverage()}`,
    );
    await leader.replica.exited;
    await set.replace(leader.replica);
  }
  return times;
}

try {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  console.log(
    `commit ${commit}, Node ${process.version}, ${SECONDS} s per case, ${CONNECTIONS} connections, ` +
      `dry backend${values['accept-only'] ? ', acceptance alone (no leader)' : ''}, ${OWNERS} owner${OWNERS > 1 ? 's' : ''}, load average at the start ${await loadAverage()}\n`,
  );
  const cases = [await sqliteCase()];
  for (const count of values.replicas.split(',').filter(Boolean).map(Number))
    cases.push(await postgresCase(count));
  console.log(
    '| store | requests | non-200 | accepted jobs/s | p50 ms | p99 ms | replicas CPU ms/job | each (leader first) | each less its idle CPU | PostgreSQL CPU ms/job (less idle) | × SQLite jobs/s | load after |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  const sqlite = cases[0]!;
  for (const c of cases) {
    console.log(
      `| ${c.name} | ${c.requests} | ${c.failures} | ${Math.round(c.jobsPerSecond)} | ${c.p50.toFixed(1)} | ` +
        `${c.p99.toFixed(1)} | ${c.replicaCpuMsPerJob.toFixed(3)} | ${c.perProcess.map((x) => x.toFixed(2)).join(' / ')} | ${c.perProcessNet.map((x) => x.toFixed(2)).join(' / ')} | ${c.postgresCpuMsPerJob.toFixed(3)} (${c.postgresNet.toFixed(2)}) | ` +
        `${(c.jobsPerSecond / sqlite.jobsPerSecond).toFixed(2)} | ${c.load} |`,
    );
  }
  console.log(
    '\nCPU ms per accepted job by process: each replica (leader first) as main thread + other threads, PostgreSQL (postmaster and backends), the load generator (every wrk); ours = replicas + PostgreSQL, and its share of all:\n',
  );
  console.log('| store | replicas main + others | PostgreSQL | wrk | ours | all | ours/all |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const c of cases) {
    const ours = c.replicaCpuMsPerJob + c.postgresCpuMsPerJob;
    const all = ours + c.wrkCpuMsPerJob;
    console.log(
      `| ${c.name} | ${c.threads.map((t) => `${t.main.toFixed(3)} + ${t.others.toFixed(3)}`).join(' / ')} | ` +
        `${c.postgresCpuMsPerJob.toFixed(3)} | ${c.wrkCpuMsPerJob.toFixed(3)} | ${ours.toFixed(3)} | ${all.toFixed(3)} | ${((100 * ours) / all).toFixed(0)} % |`,
    );
  }
  console.log("\np50 / p99 ms of each replica's requests (leader first):\n");
  for (const c of cases) {
    console.log(
      `- ${c.name}: ${c.eachLatency.map((l) => `${l.p50.toFixed(1)} / ${l.p99.toFixed(1)}`).join(', ')}`,
    );
  }
  for (const c of cases.filter((c) => c.left)) {
    const l = c.left!;
    console.log(
      `\n${c.name}: at the load's end ${l.unsubmitted} jobs not yet submitted, ${l.active} not ended; all ended ` +
        `${l.seconds.toFixed(1)} s later; from acceptance to running p50 ${Math.round(l.startP50)} ms, p99 ${Math.round(l.startP99)} ms. CPU ms per job from the load's start until then: each replica (leader first) ` +
        `${l.perProcess.map((x) => x.toFixed(3)).join(' / ')}, PostgreSQL ${l.postgres.toFixed(3)}, ours ` +
        `${(l.perProcess.reduce((a, b) => a + b, 0) + l.postgres).toFixed(3)}.` +
        // Nothing left after the load: no work of the leader's alone to divide.
        (l.active === 0
          ? ''
          : ` After the load alone: ${Math.round(l.active / l.seconds)} jobs ended per second, CPU ms per job ` +
            `${l.afterLoad.map((x) => x.toFixed(3)).join(' / ')}, PostgreSQL ${l.postgresAfterLoad.toFixed(3)}`),
    );
  }
  for (const c of cases.filter((c) => c.waits)) {
    console.log(
      `\n${c.name}: PostgreSQL's backends during the load (mean of samples every 10 ms, idle ones left out): ` +
        c.waits!.map(([what, n]) => `${what} ${n.toFixed(2)}`).join(', '),
    );
  }
  for (const c of cases.filter((c) => c.tables)) console.log(`\n${c.name}: PostgreSQL's work, ${c.tables}`);
  if (cases.some((c) => c.failures > 0)) process.exitCode = 1;
  if (values.statements) {
    const s = await statementsCase();
    const per = (n: number) => (n / s.accepted).toFixed(2);
    console.log(
      `\nstatements per accepted job (3 replicas, ${s.accepted} jobs, counted ${values['accept-only'] ? 'during the load, acceptance alone' : 'until all ended'}), load after ` +
        `${await loadAverage()}: ${per(s.total)}; by kind (first 100 characters, EXECUTEs by their statement):`,
    );
    for (const [kind, n] of s.kinds.slice(0, 25)) console.log(`- ${per(n)} ${kind}`);
  }
  if (!values['skip-kills']) {
    const t = await kills();
    const s = (ms: number) => (ms / 1000).toFixed(1);
    console.log(
      `\nkill -9 of the leader, ${KILLS} times (3 replicas, lease 15 s renewed every 2 s), load after ${await loadAverage()}:\n` +
        `- lease taken by another replica (epoch raised): p50 ${s(median(t.lease))} s, max ${s(Math.max(...t.lease))} s ` +
        `(each: ${t.lease.map(s).join(', ')})\n` +
        `- a job accepted after the kill created by the new leader: p50 ${s(median(t.acting))} s, max ` +
        `${s(Math.max(...t.acting))} s (each: ${t.acting.map(s).join(', ')})`,
    );
  }
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
process.exit();
