/**
 * Several `ucompute serve` replicas on one PostgreSQL database and the fake Kubernetes API server,
 * as a production deployment runs them: for the failover and cross-replica tests.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { CHILD_ENV } from './cli.ts';
import type { FakeCluster } from './fake-kube/cluster.ts';
import { outputTail, serving, spawnServe } from './serve.ts';
import { until } from './until.ts';

export interface Replica {
  /** Its name, also its connections' application_name in PostgreSQL. */
  name: string;
  child: ChildProcess;
  url: string;
  /** What it said (its log's warnings and errors), each distinct message once with its count, for failures. */
  output: () => string;
  /** How it ended: undefined while it runs. */
  exited: Promise<number | string>;
}

export interface ReplicaSet {
  replicas: Replica[];
  /** An admin token (the first replica's). */
  token: string;
  /** A connection of the test's own to the replicas' database. */
  db: pg.Client;
  /** The replica holding the backend lease now, and its epoch; undefined while none holds it. */
  leader(): Promise<{ replica: Replica; epoch: number } | undefined>;
  /**
   * Starts a new process in a gone replica's place (as Kubernetes restarts a pod), under the same
   * name; answers it once it serves. The set's `replicas` list it instead of the gone one.
   */
  replace(gone: Replica): Promise<Replica>;
}

export interface ReplicaOptions {
  /**
   * The lease's time and renewal period: by default the tests' (a new leader within seconds, and a
   * leader that keeps it at a load of 60: 5.5 s to renew); null for `ucompute serve`'s own defaults.
   */
  lease?: { leaseSeconds: number; renewSeconds: number } | null;
  /** Configuration merged into every replica's (e.g. accounting). */
  config?: Record<string, unknown>;
  /** Environment variables added to every replica's (e.g. NODE_OPTIONS=--cpu-prof: a profile of each). */
  env?: NodeJS.ProcessEnv;
}

const TEST_LEASE = { leaseSeconds: 6, renewSeconds: 0.5 };

/**
 * `count` replicas on the database at `databaseUrl`, on the fake `cluster`'s Kubernetes backend, or
 * on the dry backend when `cluster` is undefined (what the API alone costs: the benchmarks).
 */
export async function startReplicas(
  t: { after(cleanup: () => unknown): void },
  cluster: FakeCluster | undefined,
  databaseUrl: string,
  count: number,
  options: ReplicaOptions = {},
): Promise<ReplicaSet> {
  const replicas: Replica[] = [];
  const lease = options.lease === undefined ? TEST_LEASE : (options.lease ?? {});
  // One storage for all, as in production (one claim): the leader saves the ranks' logs there.
  const storage = await mkdtemp(join(tmpdir(), 'ucompute-replicas-storage-'));
  t.after(() => rm(storage, { recursive: true, force: true }));
  async function start(name: string): Promise<Replica> {
    const dir = await mkdtemp(join(tmpdir(), `ucompute-${name}-`));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const config = {
      monitorIntervalMs: 250,
      ...options.config,
      // Its own token: the fake API server's calls say which replica made each.
      ...cluster?.config({ kubernetes: { kubeconfig: await cluster.kubeconfigAs(name) } }),
      store: { postgres: { url: `${databaseUrl}?application_name=${name}`, ...lease } },
      storage: { root: storage },
    };
    await writeFile(join(dir, 'config.yml'), JSON.stringify(config));
    const child = spawnServe(
      ['--backend', cluster ? 'kubernetes' : 'dry', '--config', join(dir, 'config.yml'), '--data-dir', dir],
      { ...CHILD_ENV, ...options.env },
    );
    const output = distinctMessages(outputTail(child, 1_000_000));
    const exited = new Promise<number | string>((done) =>
      child.once('exit', (code, signal) => done(code ?? signal ?? 'unknown')),
    );
    t.after(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await exited;
      }
    });
    return { name, child, url: await serving(child), output, exited };
  }
  // One after the other: the first migrates the database.
  for (let i = 1; i <= count; i++) replicas.push(await start(`replica-${i}`));
  const token = (await readFile(join(replicaDir(replicas[0]!), 'admin.token'), 'utf8')).trim();
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  t.after(() => db.end());
  return {
    replicas,
    token,
    db,
    async leader() {
      const { rows } = await db.query(
        `select holder, epoch from leases where name = 'backend'
         and expires_at > (extract(epoch from clock_timestamp()) * 1000)::bigint`,
      );
      const row = rows[0] as { holder: string; epoch: string } | undefined;
      if (!row) return undefined;
      // The holder is host/pid/nonce.
      const pid = Number(row.holder.split('/')[1]);
      const replica = replicas.find((r) => r.child.pid === pid);
      return replica && { replica, epoch: Number(row.epoch) };
    },
    async replace(gone) {
      const replica = await start(gone.name);
      replicas.splice(replicas.indexOf(gone), 1, replica);
      return replica;
    },
  };
}

/**
 * A replica's output, each distinct message once (in the order first said) with how often: a
 * failure repeated a thousand times must not hide the one that came first.
 */
function distinctMessages(tail: () => string): () => string {
  return () => {
    const counts = new Map<string, number>();
    for (const line of tail().split('\n')) {
      if (line.trim() === '') continue;
      let said = line.slice(0, 400);
      try {
        const entry = JSON.parse(line) as {
          level?: number;
          msg?: string;
          reason?: string;
          err?: { message?: string };
        };
        said = [entry.level, entry.msg, entry.reason, entry.err?.message]
          .filter((x) => x !== undefined)
          .join(' | ');
      } catch {
        // Not a log entry: said as it is.
      }
      counts.set(said, (counts.get(said) ?? 0) + 1);
    }
    return [...counts].map(([said, n]) => (n > 1 ? `${said} (x${n})` : said)).join('\n');
  };
}

/** The data folder a replica was started with (its --data-dir argument). */
function replicaDir(replica: Replica): string {
  const args = replica.child.spawnargs;
  return args[args.indexOf('--data-dir') + 1]!;
}

/** Waits until some replica holds the lease, other than `not`; answers it. */
export async function leaderOtherThan(set: ReplicaSet, not: Replica | undefined, timeout = 60_000) {
  try {
    return await until(
      async () => {
        const now = await set.leader();
        return now && now.replica !== not ? now : undefined;
      },
      { describe: `a leader other than ${not?.name ?? 'none'}`, timeout, every: 50 },
    );
  } catch (error) {
    const said = set.replicas.map((r) => `${r.name}: ${r.output()}`).join('\n');
    throw new Error(`${(error as Error).message}\nthe replicas said:\n${said}`);
  }
}
