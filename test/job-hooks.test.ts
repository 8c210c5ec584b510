import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import type { JobPlugin } from '../src/plugins/plugin.ts';
import type { JobStorage } from '../src/storage/job-storage.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

/** The five plugin hooks run in one place under one error rule (JobManagement's pluginHooks). */

const alice = { username: 'alice', admin: false };
const mpi = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
};

async function harness(o: { storage?: JobStorage; plugins?: readonly JobPlugin[] } = {}) {
  const submitted: string[] = [];
  const inner = dryBackend({ runForMs: null });
  const backend = {
    ...inner,
    async submit(...args: Parameters<typeof inner.submit>) {
      submitted.push(args[0]);
      await inner.submit(...args);
    },
  };
  const service = createJobService({
    store: await openTestStore(),
    env: env(),
    backend,
    requireCredits: false,
    ...(o.storage ? { storage: o.storage } : {}),
    ...(o.plugins ? { plugins: o.plugins } : {}),
  });
  const job = async (id: string) => await service.retrieve(alice, id);
  return { service, submitted, job };
}

test('a plugin whose onCreate fails (storage full) fails the job with its reason; nothing is submitted', async () => {
  const full: JobStorage = {
    async ensureFolder() {
      throw Object.assign(new Error('ENOSPC: no space left on device, mkdir'), { code: 'ENOSPC' });
    },
    async writeFile() {
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    },
  };
  const h = await harness({ storage: full });
  const [id] = await h.service.create(alice, [mpi]);
  await until(async () => (await h.job(id!)).status.state === 'FAILURE', { describe: 'the job fails' });
  const status = (await h.job(id!)).updates.at(-1)!.status ?? '';
  assert.match(status, /^The job could not be created: \w+: ENOSPC: no space left on device/);
  assert.deepEqual(h.submitted, []);
});

test('onJobStart is guarded like the other hooks: a failing plugin does not stop the next ones', async () => {
  const started: string[] = [];
  const plugins: JobPlugin[] = [
    ...PLUGINS,
    {
      name: 'Broken',
      onJobStart() {
        throw new Error('broken at start');
      },
    },
    { name: 'Recorder', onJobStart: (_ctx, job) => void started.push(job.id) },
  ];
  const h = await harness({ plugins });
  const ids = await h.service.create(alice, [mpi, mpi]);
  await until(
    async () => {
      const states = await Promise.all(ids.map(async (id) => (await h.job(id)).status.state));
      return states.every((state) => state === 'RUNNING');
    },
    { describe: 'both jobs run' },
  );
  await until(() => started.length === 2, { describe: 'the later plugin saw both starts' });
  assert.deepEqual(started.sort(), [...ids].sort());
});

test('onCreate runs the service’s own plugin list', async () => {
  const created: string[] = [];
  const h = await harness({
    plugins: [...PLUGINS, { name: 'Recorder', onCreate: (_ctx, job) => void created.push(job.id) }],
  });
  const [id] = await h.service.create(alice, [mpi]);
  await until(async () => (await h.job(id!)).status.state === 'RUNNING', { describe: 'the job runs' });
  assert.deepEqual(created, [id]);
});
