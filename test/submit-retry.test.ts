import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend } from '../src/jobs/backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

const terminal = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

/** A dry backend whose first `refusals` submissions throw, as an API server that is restarting. */
function flaky(refusals: number): Backend & { calls: () => number } {
  const inner = dryBackend({ runForMs: null });
  let calls = 0;
  return {
    ...inner,
    calls: () => calls,
    async submit(jobId, build) {
      calls++;
      if (calls <= refusals) throw new Error('connection refused');
      return inner.submit(jobId, build);
    },
  };
}

async function run(refusals: number) {
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  await store.accounting.grant('user:alice', 'u1-standard', 1000, 0, Number.MAX_SAFE_INTEGER);
  const backend = flaky(refusals);
  const service = createJobService({ store, env: env(), backend, submitRetryMs: 1 });
  const [id] = await service.create({ username: 'alice', admin: false }, [terminal]);
  const job = async () => (await store.jobs.get(id!))!;
  return { store, backend, service, job };
}

test('a backend that refuses for a moment gets the job again, waiting longer each time', async () => {
  const { store, backend, service, job } = await run(3);
  try {
    await until(async () => (await job()).state === 'RUNNING', { describe: 'the job runs' });
    assert.equal(backend.calls(), 4, 'three refusals, then accepted');
    assert.equal((await job()).submitted, true);
  } finally {
    await service.stop();
    await backend.close();
    await store.close();
  }
});

test('a backend that keeps refusing fails the job after five tries, saying why', async () => {
  const { store, backend, service, job } = await run(100);
  try {
    await until(async () => (await job()).state === 'FAILURE', { describe: 'the job fails' });
    assert.equal(backend.calls(), 5);
    await until(async () => (await store.jobs.updatesOf((await job()).id)).length > 1, {
      describe: 'the status is written',
    });
    assert.match(
      (await store.jobs.updatesOf((await job()).id)).at(-1)?.status ?? '',
      /The backend refused the job: connection refused/,
    );
  } finally {
    await service.stop();
    await backend.close();
    await store.close();
  }
});
