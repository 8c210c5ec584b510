import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { sessionRevocation } from '../src/interactive/sessions.ts';
import { resourceSeriesCleanup } from '../src/jobs/resource-sampler.ts';
import { createJobService } from '../src/jobs/service.ts';
import type { JobSpecification } from '../src/model/job.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { env } from './support/fixtures.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { until } from './support/until.ts';

/**
 * What a job costs PostgreSQL, counted rather than timed (issue 21: ~0.5 ms of CPU per statement
 * on this machine, so statements per job bound the jobs per second): the statements this process
 * sends (each `query` of node-postgres, one round trip; a simple query of several statements is
 * one) while jobs are submitted one per request by 16 clients at once (as ha.bench does) and run
 * to their end, charged, on the dry backend, by a leader writing through the store fenced by its
 * epoch. How many jobs share a batch depends on timing. Measured with 160 jobs, loaded: 21.77 per
 * job at 6a88d28 (every leader step a statement or transaction per job), 14.10 with submission and
 * backend events in batches, 5.41 with charges in batches too, 3.21-3.54 with the clean-up's
 * deletes as well; 1.75 with an intake flush in 2 round trips (the credits read with the begin,
 * 23:38, load ~40); 1.80 with those statements executed as prepared on their connection (the same
 * round trips, 2026-11-28 02:09, load ~60). The bound fails when any of the leader's steps goes back to one job at a time
 * (the intake's own round trips are pinned in intake-batching.test.ts).
 */

const JOBS = 160;
const CLIENTS = 16;
const LEASE = 'backend';
const SPEC: JobSpecification = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

const closing: (() => Promise<unknown>)[] = [];

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe("the leader's statements per job", () => {
  after(async () => {
    for (const close of closing.reverse()) await close();
  });

  test('PostgreSQL: a job accepted, submitted, run, charged and cleaned up by a fenced leader costs few statements', {
    skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
  }, async () => {
    const url = await newPostgresDatabase();
    const store = await openPostgresStore(url);
    closing.push(() => store.close());
    // The test's own look at the jobs, on a connection of its own that is not counted.
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    closing.push(() => probe.end());
    const count = async (sql: string) => Number((await probe.query(sql)).rows[0].n);
    const backend = dryBackend({ runForMs: 0 });
    closing.push(() => backend.close());
    const service = createJobService({
      store,
      env: env(),
      backend,
      requireCredits: true,
      replicated: true,
      // As `ucompute serve` has them: an ended job's sessions and resource samples removed.
      plugins: [...PLUGINS, sessionRevocation(store), resourceSeriesCleanup(store)],
    });
    await store.accounting.grant('user:alice', 'u1-standard', 1e9, 0, Date.now() + 86_400_000);
    const lease = (await store.leases.acquire(LEASE, 'leader', 600_000))!;
    closing.push(await service.lead(store.fenced({ lease: LEASE, epoch: lease.epoch })));

    let statements = 0;
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      if (this !== probe) statements++;
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    closing.push(async () => {
      pg.Client.prototype.query = query;
    });

    const alice = { username: 'alice', admin: false };
    let sent = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (sent < JOBS) {
          sent++;
          await service.create(alice, [SPEC]);
        }
      }),
    );
    await until(
      async () => (await count("select count(*) as n from jobs where state = 'SUCCESS'")) === JOBS,
      {
        describe: `all ${JOBS} jobs end`,
        timeout: 120_000,
      },
    );
    // Each ended job's charge recorded (then its sessions and samples are removed): counted too.
    await until(async () => (await count('select count(*) as n from charges')) === JOBS, {
      describe: 'every job charged',
      timeout: 60_000,
    });
    pg.Client.prototype.query = query;
    const perJob = statements / JOBS;
    console.log(`${perJob.toFixed(2)} statements per job (${statements} for ${JOBS} jobs)`);
    assert.ok(perJob <= 5, `${perJob.toFixed(2)} statements per job`);
  });
});
