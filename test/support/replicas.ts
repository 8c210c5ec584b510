/**
 * Several `ucompute serve` replicas on one PostgreSQL database and the fake Kubernetes API server,
 * as a production deployment runs them: for the failover and cross-replica tests.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
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
}

/** The lease settings of the tests: a new leader within seconds, and a leader that keeps it at a load of 60 (5.5 s to renew). */
const LEASE = { leaseSeconds: 6, renewSeconds: 0.5 };

export async function startReplicas(
  t: TestContext,
  cluster: FakeCluster,
  databaseUrl: string,
  count: number,
): Promise<ReplicaSet> {
  const replicas: Replica[] = [];
  // One storage for all, as in production (one claim): the leader saves the ranks' logs there.
  const storage = await mkdtemp(join(tmpdir(), 'ucompute-replicas-storage-'));
  t.after(() => rm(storage, { recursive: true, force: true }));
  for (let i = 1; i <= count; i++) {
    const name = `replica-${i}`;
    const dir = await mkdtemp(join(tmpdir(), `ucompute-${name}-`));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const config = {
      ...cluster.config(),
      store: { postgres: { url: `${databaseUrl}?application_name=${name}`, ...LEASE } },
      storage: { root: storage },
      monitorIntervalMs: 250,
    };
    await writeFile(join(dir, 'config.yml'), JSON.stringify(config));
    const child = spawnServe(
      ['--backend', 'kubernetes', '--config', join(dir, 'config.yml'), '--data-dir', dir],
      CHILD_ENV,
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
    // One after the other: the first migrates the database.
    const url = await serving(child);
    replicas.push({ name, child, url, output, exited });
  }
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
