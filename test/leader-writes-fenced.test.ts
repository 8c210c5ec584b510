import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import type { JobSpecification, JobState } from '../src/model/job.ts';
import { FencedError } from '../src/store/leases.ts';
import type { Store } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';
import { until } from './support/until.ts';

// The leader's watches (storage quotas, expiry warnings) write through the backend loop's store,
// fenced by the leader's epoch like its other writes: a leader that was paused and resumes after
// another took over writes none of their notices, holds or releases.

const LEASE = 'backend';
const SPEC: JobSpecification = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

for (const kind of STORE_KINDS) {
  describe(`the leader's watches' writes on ${kind}`, () => {
    const closing: (() => Promise<void>)[] = [];
    after(async () => {
      for (const close of closing.reverse()) await close();
    });

    async function insert(store: Store, id: string, state: JobState) {
      await store.jobs.insert([
        {
          id,
          createdBy: 'alice',
          project: null,
          application: 'mpi-hello',
          createdAt: Date.now(),
          specification: SPEC,
          timeAllocationMs: null,
          pricePerUnit: 1,
          firstUpdate: { timestamp: Date.now(), state, status: 'made by the test' },
        },
      ]);
    }

    test('a deposed leader writes no notice, hold or release; a replica that never led is refused', async () => {
      const store = await openTestStore(kind);
      closing.push(() => store.close());
      const backend = dryBackend({ runForMs: null });
      closing.push(() => backend.close());
      const service = createJobService({
        store,
        env: env(),
        backend,
        requireCredits: false,
        replicated: true,
      });
      await assert.rejects(service.leader.addStatus('none', 'x'), /does not lead/);

      const a = (await store.leases.acquire(LEASE, 'a', 1))!;
      const stopLeading = await service.lead(store.fenced({ lease: LEASE, epoch: a.epoch }));
      closing.push(stopLeading);
      // Made after the leader's catch-up, so that its loop has not adopted them: only the writes
      // below change them.
      await insert(store, 'running', 'RUNNING');
      await insert(store, 'queued', 'IN_QUEUE');
      await insert(store, 'held', 'SUSPENDED');
      assert.equal(await service.leader.addStatus('running', 'while leading'), true);
      assert.equal((await store.jobs.updatesOf('running')).at(-1)?.status, 'while leading');

      await until(() => store.leases.acquire(LEASE, 'b', 60_000), {
        describe: 'b took the lease',
        timeout: 30_000,
      });
      const before = await Promise.all(['running', 'queued', 'held'].map((id) => store.jobs.updatesOf(id)));
      await assert.rejects(service.leader.addStatus('running', 'Storage quota used up'), FencedError);
      await assert.rejects(service.leader.holdForQuota('queued', 'over the quota'), FencedError);
      await assert.rejects(service.leader.releaseFromQuota('held'), FencedError);
      const afterwards = await Promise.all(
        ['running', 'queued', 'held'].map((id) => store.jobs.updatesOf(id)),
      );
      assert.deepEqual(afterwards, before, 'no update written by the deposed leader');
      assert.deepEqual(await Promise.all(['running', 'queued', 'held'].map((id) => store.jobs.state(id))), [
        'RUNNING',
        'IN_QUEUE',
        'SUSPENDED',
      ]);

      await stopLeading();
      await assert.rejects(service.leader.addStatus('running', 'after stopping'), /does not lead/);
    });
  });
}
