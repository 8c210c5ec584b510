import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import type { Backend, BackendEvent } from '../src/jobs/backend.ts';
import { exitsInARow, isRestartExit, restartDelayMs } from '../src/jobs/restart-policy.ts';
import { createJobService } from '../src/jobs/service.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import type { JobUpdate } from '../src/model/job.ts';
import { isFinal } from '../src/model/job-states.ts';
import { eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { catalog, env, products } from './support/fixtures.ts';
import { openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { openTestStore } from './support/store.ts';

/** restartOnExit: a job whose containers end is SUSPENDED and runs again, backing off; cancel ends it. */

const alice = { username: 'alice', admin: false };
const MINUTE = 60_000;

test('restarts back off from 10 s, doubling to 5 minutes; a steady run of 10 minutes starts again', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 20].map(restartDelayMs),
    [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
  );
  const running = (at: number): JobUpdate => ({ state: 'RUNNING', timestamp: at });
  const exit = (at: number): JobUpdate => ({ state: 'SUSPENDED', allowRestart: true, timestamp: at });
  assert.equal(exitsInARow([], 0), 1);
  assert.equal(exitsInARow([running(0)], MINUTE), 1);
  assert.equal(exitsInARow([running(0), exit(MINUTE), running(2 * MINUTE)], 3 * MINUTE), 2);
  // A suspend by the user is not an exit.
  const suspended: JobUpdate = { state: 'SUSPENDED', timestamp: MINUTE };
  assert.equal(exitsInARow([running(0), suspended, running(2 * MINUTE)], 3 * MINUTE), 1);
  assert.equal(exitsInARow([running(0), exit(MINUTE), running(2 * MINUTE)], 13 * MINUTE), 1);
  assert.ok(isRestartExit(exit(0)) && !isRestartExit(suspended));
});

test('an end the backend reports while ucompute cancels or expires the job is not restarted from', async () => {
  // A backend that sees the containers end (and says so) before its cancel returns.
  const inner = dryBackend({ runForMs: null });
  const listeners: ((e: BackendEvent) => void)[] = [];
  const backend: Backend = {
    ...inner,
    onEvent(listener) {
      listeners.push(listener);
      inner.onEvent(listener);
    },
    async cancel(jobId) {
      await inner.cancel(jobId);
      for (const l of listeners) l({ jobId, state: 'SUCCESS', status: 'The job ended', at: clock });
      await new Promise((r) => setTimeout(r, 20));
    },
  };
  let clock = Date.now();
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const service = createJobService({ store, env: env(), backend, now: () => clock, requireCredits: false });
  const terminal = (minutes: number) => ({
    application: { name: 'terminal', version: '1.0' },
    product: { id: 'u1-standard-1', category: 'u1-standard' },
    timeAllocation: { hours: 0, minutes, seconds: 0 },
    restartOnExit: true,
  });
  const [cancelled, expired] = await service.create(alice, [terminal(30), terminal(1)]);
  const state = async (id: string) => (await store.jobs.get(id))!.state;
  for (
    let i = 0;
    i < 100 && ((await state(cancelled!)) !== 'RUNNING' || (await state(expired!)) !== 'RUNNING');
    i++
  )
    await new Promise((r) => setTimeout(r, 10));
  await service.terminate(alice, [cancelled!]);
  clock += 2 * MINUTE;
  await service.monitor();
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(await state(cancelled!), 'SUCCESS', JSON.stringify(await store.jobs.updatesOf(cancelled!)));
  // Ended for good (by the expiry, or by the end the backend told first), not waiting for a restart.
  assert.ok(isFinal(await state(expired!)), JSON.stringify(await store.jobs.updatesOf(expired!)));
  assert.equal((await store.jobs.updatesOf(expired!)).filter(isRestartExit).length, 0);
  await service.stop();
});

const tools = await needs('bwrap', 'nft', 'ip');

test(
  'local backend: a job that exits restarts in the same folder after its back-off; cancel ends it for good',
  tools,
  async (t) => {
    const { storageRoot, store, service } = await openTestService(t, { requireCredits: false });
    await store.users.createUser('alice', false);
    await mkdir(join(storageRoot, 'home/alice'), { recursive: true });
    await writeFile(join(storageRoot, 'home/alice/words.txt'), 'b a b\n');
    const [id, sleeper] = await service.create(alice, [
      {
        application: { name: 'word-count', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: { input: { type: 'file', path: '/home/alice/words.txt', readOnly: true } },
        restartOnExit: true,
      },
      {
        application: { name: 'terminal', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        restartOnExit: true,
      },
    ]);
    const updates = async () => await store.jobs.updatesOf(id!);
    const runs = async () => (await updates()).filter((u) => u.state === 'RUNNING').length;
    const exits = async () => (await updates()).filter(isRestartExit);
    const wait = async (what: string, check: () => Promise<boolean>, ms: number) => {
      for (let i = 0; i < ms / 50 && !(await check()); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(await check(), `${what}: ${JSON.stringify(await updates(), null, 1)}`);
    };

    // Cancelled while it runs: its containers' end is the cancel's, not an exit to restart from.
    await wait('the sleeper runs', async () => (await store.jobs.get(sleeper!))!.state === 'RUNNING', 30_000);
    await service.terminate(alice, [sleeper!]);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(
      (await store.jobs.get(sleeper!))!.state,
      'SUCCESS',
      JSON.stringify(await store.jobs.updatesOf(sleeper!)),
    );
    assert.equal((await store.jobs.updatesOf(sleeper!)).filter(isRestartExit).length, 0);

    await wait('the first run exits', async () => (await exits()).length === 1, 30_000);
    assert.equal((await store.jobs.get(id!))!.state, 'SUSPENDED');
    assert.match(
      (await exits())[0]!.status!,
      /exit code 0 on every rank\); restarting in 10 s \(restartOnExit\)$/,
    );
    const exitedAt = (await exits())[0]!.timestamp;
    // Its run is paid as at a suspension: the started minute too.
    const charged = async () =>
      (await store.accounting.charges('user:alice', 0, Number.MAX_SAFE_INTEGER))
        .filter((c) => c.jobId === id)
        .map((c) => c.chargeId);
    await wait('the run is charged', async () => (await charged()).length === 1, 5_000);
    assert.deepEqual(await charged(), [`${id}:0-0`]);
    await wait('it runs again', async () => (await runs()) === 2, 40_000);
    const again = (await updates()).find((u) => u.state === 'IN_QUEUE' && u.timestamp > exitedAt)!;
    assert.ok(
      again.timestamp - exitedAt >= 10_000,
      `not before its back-off (${again.timestamp - exitedAt} ms)`,
    );
    assert.equal(again.status, 'The job is restarting (restart 1 in a row)');
    assert.equal(
      (await store.jobs.get(id!))!.outputFolder,
      `/home/alice/Jobs/Word count/${id}`,
      'the same folder',
    );
    await wait('the second run exits', async () => (await exits()).length === 2, 30_000);
    assert.match(
      (await exits())[1]!.status!,
      /restarting in 20 s \(restartOnExit\) \(exit 2 in a row: backing off\)$/,
    );

    await service.terminate(alice, [id!]);
    const ended = (await store.jobs.get(id!))!;
    assert.equal(ended.state, 'SUCCESS');
    assert.equal((await updates()).at(-1)!.status, 'The job was cancelled');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(runs(), 2, 'a cancelled job does not run again');
  },
);

test('kubernetes: the ended Volcano Job is created again; cancel while running ends it for good', async (t) => {
  const cluster = await fakeCluster(t);
  const config = resolvePipelineConfig(cluster.config());
  const backend = kubernetesBackend({ config, settings: { kubeconfig: cluster.kubeconfig } });
  const store = await openTestStore();
  // The service's clock is ahead: every back-off has passed when the exit is written.
  const service = createJobService({
    store,
    env: { catalog, products, config },
    backend,
    now: () => Date.now() + 3_600_000,
    requireCredits: false,
  });
  t.after(async () => {
    await service.stop();
    await backend.close();
  });
  await service.start();
  const [id] = await service.create(alice, [
    {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      timeAllocation: null,
      restartOnExit: true,
    },
  ]);
  const state = async () => (await store.jobs.get(id!))!.state;
  const uid = () => cluster.volcano.job(id!)?.metadata.uid as string | undefined;
  await eventually(() => cluster.volcano.job(id!) !== undefined);
  const first = uid();
  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  await eventually(async () => (await state()) === 'RUNNING');
  cluster.volcano.finish(id!, [0]);
  await eventually(async () => (await store.jobs.updatesOf(id!)).some(isRestartExit));
  await eventually(() => uid() !== undefined && uid() !== first, 10_000);
  assert.equal(await state(), 'IN_QUEUE');
  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  await eventually(async () => (await state()) === 'RUNNING');
  await service.terminate(alice, [id!]);
  assert.equal(await state(), 'SUCCESS');
  assert.equal(cluster.volcano.job(id!), undefined);
  assert.deepEqual(cluster.api.invalid, []);
});
