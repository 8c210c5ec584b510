import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import type { JobSpecification } from '../src/model/job.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { env } from './support/fixtures.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { until } from './support/until.ts';

/**
 * A leader queues the jobs another replica accepts as their creation is announced (adoption.ts),
 * not only at its monitor's pass: here the pass never comes (an hour apart), so only the
 * announcement can get the follower's jobs to the backend. Two services on one database, as two
 * replicas; the follower's store is a second connection pool, as another process's would be.
 */

const SPEC: JobSpecification = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};
const LEASE = 'backend';
const HOUR = 3_600_000;

const closing: (() => Promise<unknown>)[] = [];

describe('a leader adopts the jobs other replicas accept', () => {
  after(async () => {
    for (const close of closing.reverse()) await close();
  });

  test('PostgreSQL: a follower’s jobs run without the monitor’s pass, and those created before the leader started too', {
    skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
  }, async () => {
    const url = await newPostgresDatabase();
    const replica = async () => {
      const store = await openPostgresStore(url);
      closing.push(() => store.close());
      const backend = dryBackend({ runForMs: 0 });
      closing.push(() => backend.close());
      const service = createJobService({
        store,
        env: env(),
        backend,
        requireCredits: false,
        replicated: true,
        monitorIntervalMs: HOUR,
      });
      return { store, service };
    };
    const leader = await replica();
    const follower = await replica();
    const alice = { username: 'alice', admin: false };
    const state = async (id: string) => (await leader.store.jobs.get(id))?.state;

    // Accepted before anyone leads: the leader's start (recover) queues it.
    const [early] = await follower.service.create(alice, [SPEC]);
    const lease = (await leader.store.leases.acquire(LEASE, 'leader', HOUR))!;
    closing.push(await leader.service.lead(leader.store.fenced({ lease: LEASE, epoch: lease.epoch })));
    await until(async () => (await state(early!)) === 'SUCCESS', { describe: 'the early job ends' });

    // Accepted by the follower while the other leads: only the announcement can queue them.
    const ids = (
      await Promise.all(Array.from({ length: 5 }, () => follower.service.create(alice, [SPEC])))
    ).flat();
    await until(async () => (await Promise.all(ids.map(state))).every((s) => s === 'SUCCESS'), {
      describe: "the follower's jobs end",
    });
    assert.equal(ids.length, 5);
  });
});
