import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { ValidationError } from '../src/model/errors.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

const server = {
  application: { name: 'file-server', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};
const checkWith = (jobId: string) => ({
  application: { name: 'http-check', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: { server: { type: 'peer', hostname: 'web', jobId } },
});

test('a peer must be an active job the caller may act on', async () => {
  const store = await openTestStore();
  for (const name of ['alice', 'bob']) {
    await store.users.createUser(name, false);
    await store.accounting.grant(`user:${name}`, 'u1-standard', 1000, 0, Number.MAX_SAFE_INTEGER);
  }
  const backend = dryBackend({ runForMs: null });
  const service = createJobService({ store, env: env(), backend });
  const alice = { username: 'alice', admin: false };
  const bob = { username: 'bob', admin: false };
  try {
    const [alices] = await service.create(alice, [server]);
    const [bobs] = await service.create(bob, [server]);
    await until(async () => (await store.jobs.running(undefined, 10)).length === 2, {
      describe: 'both running',
    });

    const peerIssues = async (caller: typeof alice, jobId: string) => {
      try {
        await service.create(caller, [checkWith(jobId)]);
        return [];
      } catch (e) {
        assert.ok(e instanceof ValidationError, String(e));
        return e.issues.map((i) => `${i.path}: ${i.message}`);
      }
    };
    const before = await store.jobs.countByState();
    assert.deepEqual(await peerIssues(alice, bobs!), [
      `items[0].specification: peer web names no job of yours (${bobs})`,
    ]);
    assert.deepEqual(await peerIssues(alice, 'nosuchjob'), [
      'items[0].specification: peer web names no job of yours (nosuchjob)',
    ]);
    assert.deepEqual(await store.jobs.countByState(), before, 'a refused peer creates nothing');
    assert.deepEqual(await peerIssues(alice, alices!), []);

    await service.terminate(alice, [alices!]);
    assert.deepEqual(await peerIssues(alice, alices!), [
      `items[0].specification: peer web names a job that has ended (${alices})`,
    ]);
  } finally {
    await service.stop();
    await backend.close();
    await store.close();
  }
});
