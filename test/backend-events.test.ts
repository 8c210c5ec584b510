import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend, BackendEvent } from '../src/jobs/backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

const terminal = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

/** A backend that accepts jobs and reports only what the test makes it say. */
function scripted(): Backend & { say(e: Omit<BackendEvent, 'at'>): void } {
  const inner = dryBackend({ runForMs: null });
  const listeners: ((e: BackendEvent) => void)[] = [];
  return {
    ...inner,
    async submit() {},
    onEvent: (l) => listeners.push(l),
    say: (e) => {
      for (const l of listeners) l({ ...e, at: Date.now() });
    },
  };
}

test('a backend tells why a job waits, then that it runs, each as a status in the job updates', async () => {
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  await store.accounting.grant('user:alice', 'u1-standard', 1000, 0, Number.MAX_SAFE_INTEGER);
  const backend = scripted();
  const service = createJobService({ store, env: env(), backend });
  try {
    const [id] = await service.create({ username: 'alice', admin: false }, [terminal]);
    const jobId = id!;
    const statuses = async () => (await store.jobs.updatesOf(jobId)).map((u) => [u.state, u.status]);
    await until(async () => (await store.jobs.get(jobId))!.submitted, { describe: 'submitted' });
    backend.say({ jobId, state: 'IN_QUEUE', status: 'Waiting for 8 CPUs, position 2 in the queue' });
    await until(async () => (await statuses()).some(([, s]) => s?.startsWith('Waiting')), {
      describe: 'status written',
    });
    assert.equal((await store.jobs.get(jobId))!.state, 'IN_QUEUE');
    assert.deepEqual((await statuses()).at(-1), [undefined, 'Waiting for 8 CPUs, position 2 in the queue']);
    const before = (await statuses()).length;

    backend.say({ jobId, state: 'RUNNING', status: 'The job is running' });
    backend.say({ jobId, state: 'RUNNING', status: 'The job is running (2 of 2 replicas ready)' });
    await until(async () => (await statuses()).at(-1)?.[1]?.endsWith('ready)') === true, {
      describe: 'both written',
    });
    assert.equal((await store.jobs.get(jobId))!.state, 'RUNNING');
    assert.deepEqual((await statuses()).slice(-2), [
      ['RUNNING', 'The job is running'],
      [undefined, 'The job is running (2 of 2 replicas ready)'],
    ]);

    // A late queue report for a job that already runs changes nothing: the report after it is
    // written (events are written in the order they come), and nothing before that.
    backend.say({ jobId, state: 'IN_QUEUE', status: 'Waiting, position 1 in the queue' });
    backend.say({ jobId, state: 'RUNNING', status: 'The job is running (1 of 2 replicas ready)' });
    await until(async () => (await statuses()).length > before + 2, { describe: 'the next report written' });
    assert.deepEqual((await statuses()).slice(before + 2), [
      [undefined, 'The job is running (1 of 2 replicas ready)'],
    ]);
    assert.equal((await store.jobs.get(jobId))!.state, 'RUNNING');
  } finally {
    await service.stop();
    await backend.close();
    await store.close();
  }
});
