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
import { fakeCluster } from './support/fake-kube/cluster.ts';
import { catalog, env, products } from './support/fixtures.ts';
import { openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { manualClock } from './support/manual-clock.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

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
  const clock = manualClock();
  const inner = dryBackend({ runForMs: null, clock });
  const listeners: ((e: BackendEvent) => void)[] = [];
  const backend: Backend = {
    ...inner,
    onEvent(listener) {
      listeners.push(listener);
      inner.onEvent(listener);
    },
    async cancel(jobId) {
      await inner.cancel(jobId);
      for (const l of listeners) l({ jobId, state: 'SUCCESS', status: 'The job ended', at: clock.now() });
      // The end is written before cancel returns (as a restart's suspension, if it is taken for one).
      await until(async () => (await store.jobs.get(jobId))!.state !== 'RUNNING', {
        describe: `the end of ${jobId} written`,
      });
    },
  };
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const service = createJobService({ store, env: env(), backend, clock, requireCredits: false });
  const terminal = (minutes: number) => ({
    application: { name: 'terminal', version: '1.0' },
    product: { id: 'u1-standard-1', category: 'u1-standard' },
    timeAllocation: { hours: 0, minutes, seconds: 0 },
    restartOnExit: true,
  });
  const [cancelled, expired] = await service.create(alice, [terminal(30), terminal(1)]);
  const state = async (id: string) => (await store.jobs.get(id))!.state;
  await until(async () => (await state(cancelled!)) === 'RUNNING' && (await state(expired!)) === 'RUNNING', {
    describe: 'both run',
  });
  await service.terminate(alice, [cancelled!]);
  await clock.advance(2 * MINUTE);
  await service.monitor();
  // Ended for good (by the expiry, or by the end the backend told first), not waiting for a restart.
  await until(async () => isFinal(await state(expired!)), { describe: 'the expired job ends' });
  assert.equal(await state(cancelled!), 'SUCCESS', JSON.stringify(await store.jobs.updatesOf(cancelled!)));
  await clock.advance(restartDelayMs(1));
  for (const id of [cancelled!, expired!]) {
    assert.ok(isFinal(await state(id)), JSON.stringify(await store.jobs.updatesOf(id)));
    assert.equal((await store.jobs.updatesOf(id)).filter(isRestartExit).length, 0);
  }
  await service.stop();
});

test('an exit is charged as a suspension, the started minute too, and the job runs again after its back-off', async () => {
  const clock = manualClock();
  // Every run of the job ends after 30 s on the clock.
  const backend = dryBackend({ runForMs: 30_000, clock });
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const service = createJobService({ store, env: env(), backend, clock, requireCredits: false });
  const [id] = await service.create(alice, [
    {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      restartOnExit: true,
    },
  ]);
  const updates = () => store.jobs.updatesOf(id!);
  const runs = async () => (await updates()).filter((u) => u.state === 'RUNNING').length;
  await until(async () => (await runs()) === 1, { describe: 'the job runs' });
  await clock.advance(30_000);
  const exit = await until(async () => (await updates()).find(isRestartExit), { describe: 'the run exits' });
  assert.equal(exit.timestamp, clock.now());
  const charged = (await store.accounting.charges('user:alice', 0, Number.MAX_SAFE_INTEGER)).map((c) => [
    c.chargeId,
    c.periods,
  ]);
  assert.deepEqual(charged, [[`${id}:0-0`, 1]]);
  await clock.advance(restartDelayMs(1) - 1);
  assert.equal((await store.jobs.get(id!))!.state, 'SUSPENDED', 'not before its back-off');
  await clock.advance(1);
  await until(async () => (await runs()) === 2, { describe: 'the job runs again' });
  await service.terminate(alice, [id!]);
  await service.stop();
});

const tools = await needs('bwrap', 'nft', 'ip');

test(
  'local backend: a job that exits restarts in the same folder after its back-off; cancel ends it for good',
  tools,
  async (t) => {
    const clock = manualClock();
    const { storageRoot, store, service } = await openTestService(t, { requireCredits: false, clock });
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
    const updates = () => store.jobs.updatesOf(id!);
    const runs = async () => (await updates()).filter((u) => u.state === 'RUNNING').length;
    const exits = async () => (await updates()).filter(isRestartExit);
    const wait = (describe: string, check: () => Promise<boolean>) =>
      until(check, { describe, timeout: 30_000 });

    // Cancelled while it runs: its containers' end is the cancel's, not an exit to restart from.
    await wait('the sleeper runs', async () => (await store.jobs.get(sleeper!))!.state === 'RUNNING');
    await service.terminate(alice, [sleeper!]);
    assert.equal(
      (await store.jobs.get(sleeper!))!.state,
      'SUCCESS',
      JSON.stringify(await store.jobs.updatesOf(sleeper!)),
    );

    await wait('the first run exits', async () => (await exits()).length === 1);
    assert.equal((await store.jobs.get(id!))!.state, 'SUSPENDED');
    assert.match(
      (await exits())[0]!.status!,
      /exit code 0 on every rank\); restarting in 10 s \(restartOnExit\)$/,
    );
    const exitedAt = (await exits())[0]!.timestamp;
    // The back-off counts from the exit, on the service's clock.
    await clock.advanceTo(exitedAt + 10_000 - 1);
    assert.equal((await store.jobs.get(id!))!.state, 'SUSPENDED', 'not before its back-off');
    await clock.advance(1);
    await wait('it runs again', async () => (await runs()) === 2);
    const again = (await updates()).find((u) => u.state === 'IN_QUEUE' && u.timestamp > exitedAt)!;
    assert.equal(again.timestamp - exitedAt, 10_000);
    assert.equal(again.status, 'The job is restarting (restart 1 in a row)');
    assert.equal(
      (await store.jobs.get(id!))!.outputFolder,
      `/home/alice/Jobs/Word count/${id}`,
      'the same folder',
    );
    await wait('the second run exits', async () => (await exits()).length === 2);
    assert.match(
      (await exits())[1]!.status!,
      /restarting in 20 s \(restartOnExit\) \(exit 2 in a row: backing off\)$/,
    );

    await service.terminate(alice, [id!]);
    const ended = (await store.jobs.get(id!))!;
    assert.equal(ended.state, 'SUCCESS');
    assert.equal((await updates()).at(-1)!.status, 'The job was cancelled');
    // Past the second back-off, for both: a cancelled job does not run again.
    await clock.advance(restartDelayMs(2));
    assert.equal(await runs(), 2, 'a cancelled job does not run again');
    assert.equal((await store.jobs.get(id!))!.state, 'SUCCESS');
    assert.equal((await store.jobs.updatesOf(sleeper!)).filter(isRestartExit).length, 0);
    assert.equal((await store.jobs.get(sleeper!))!.state, 'SUCCESS');
  },
);

test('kubernetes: the ended Volcano Job is created again; cancel while running ends it for good', async (t) => {
  const cluster = await fakeCluster(t);
  const config = resolvePipelineConfig({ ...cluster.config(), maxTimeAllocationHours: null });
  // The backend and the service on one clock, moved past the back-off once the exit is written.
  const clock = manualClock();
  const backend = kubernetesBackend({ config, settings: { kubeconfig: cluster.kubeconfig }, now: clock.now });
  const store = await openTestStore();
  const service = createJobService({
    store,
    env: { catalog, products, config },
    backend,
    clock,
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
  // Created, and given its PodGroup by the controller (a moment after the create answered).
  const created = (describe: string, other?: string) =>
    until(
      () => {
        const job = cluster.volcano.job(id!);
        return job?.metadata.uid !== other && job?.status?.state?.phase === 'Pending' && job.metadata.uid;
      },
      { describe },
    );
  const first = await created('the Volcano Job is created');
  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  await until(async () => (await state()) === 'RUNNING', { describe: 'the job runs' });
  cluster.volcano.finish(id!, [0]);
  await until(async () => (await store.jobs.updatesOf(id!)).some(isRestartExit), {
    describe: 'the exit is written',
  });
  await clock.advance(restartDelayMs(1));
  await created('the Volcano Job is created again', first);
  assert.equal(await state(), 'IN_QUEUE');
  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  await until(async () => (await state()) === 'RUNNING', { describe: 'the job runs' });
  await service.terminate(alice, [id!]);
  assert.equal(await state(), 'SUCCESS');
  assert.equal(cluster.volcano.job(id!), undefined);
  assert.deepEqual(cluster.api.invalid, []);
});
