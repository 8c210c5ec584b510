import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { STRANDED_AFTER_MS } from '../src/backends/kubernetes/decisions.ts';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { type Clock, systemClock } from '../src/model/clock.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import type { Store } from '../src/store/store.ts';
import { CHILD_ENV } from './support/cli.ts';
import { eventually, type FakeCluster, fakeCluster } from './support/fake-kube/cluster.ts';
import { catalog, products } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { serving, spawnServe } from './support/serve.ts';
import { openTestStore } from './support/store.ts';

const alice = { username: 'alice', admin: false };
const job = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 2,
  parameters: {},
  ...extra,
});

async function serviceOn(
  t: import('node:test').TestContext,
  cluster: FakeCluster,
  store?: Store,
  clock: Clock = systemClock,
  requireCredits = false,
) {
  store ??= await openTestStore();
  const config = resolvePipelineConfig(cluster.config());
  const backend = kubernetesBackend({
    config,
    settings: { kubeconfig: cluster.kubeconfig },
    now: () => clock.now(),
  });
  const service = createJobService({
    store,
    env: { catalog, products, config },
    backend,
    clock,
    requireCredits,
  });
  t.after(async () => {
    await service.stop();
    await backend.close();
  });
  const state = async (id: string) => (await service.retrieve(alice, id)).status.state;
  return { service, backend, store, state };
}

test('through the job service: a job is submitted, runs on the cluster and succeeds with its exit codes', async (t) => {
  const cluster = await fakeCluster(t, { autopilot: true });
  const { service, state } = await serviceOn(t, cluster);
  await service.start();
  const [id] = await service.create(alice, [job()]);
  await eventually(async () => (await state(id!)) === 'SUCCESS');
  const done = await service.retrieve(alice, id!);
  assert.deepEqual(done.status.exitCode, { '0': 0, '1': 0 });
  assert.ok(
    done.updates.some((u) => u.state === 'RUNNING'),
    JSON.stringify(done.updates),
  );
  await eventually(() => cluster.api.list('jobs').length === 0);
  assert.deepEqual(cluster.api.invalid, []);
});

test('through the job service: cancel and expiry delete the job on the cluster', async (t) => {
  const cluster = await fakeCluster(t);
  const clock = manualClock(Date.now());
  const { service, state } = await serviceOn(t, cluster, undefined, clock);
  await service.start();
  const [a, b] = await service.create(alice, [
    job(),
    job({ timeAllocation: { hours: 0, minutes: 1, seconds: 0 } }),
  ]);
  for (const id of [a!, b!]) {
    await eventually(() => cluster.volcano.job(id) !== undefined);
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await eventually(async () => (await state(id)) === 'RUNNING');
  }
  await service.terminate(alice, [a!]);
  assert.equal(await state(a!), 'SUCCESS');
  assert.equal(cluster.volcano.job(a!), undefined);
  await clock.advance(2 * 60_000);
  await service.monitor();
  assert.equal(await state(b!), 'EXPIRED');
  assert.equal(cluster.volcano.job(b!), undefined);
  // The namespace's isolation policy stays for the next jobs; nothing of theirs does.
  assert.deepEqual(
    cluster.api.list('networkpolicies').map((p) => p.metadata.name),
    ['job-isolation'],
  );
  assert.deepEqual(cluster.api.list('jobs'), []);
});

test('through the job service: cancel, expiry and credits on the cluster end jobs with their outcomes', async (t) => {
  const cluster = await fakeCluster(t);
  const store = await openTestStore();
  const clock = manualClock(Date.now());
  const { service } = await serviceOn(t, cluster, store, clock, true);
  const bob = { username: 'bob', admin: false };
  const status = async (id: string) =>
    (await service.retrieve({ username: 'admin', admin: true }, id)).status;
  const state = async (id: string) => (await status(id)).state;
  const outcome = async (id: string) => (await status(id)).outcome?.text;
  await store.accounting.grant(
    'user:alice',
    'u1-standard',
    1_000_000,
    clock.now() - 60_000,
    clock.now() + 86_400_000,
  );
  // Four credits: two minutes of u1-standard-2 (on one replica).
  await store.accounting.grant('user:bob', 'u1-standard', 4, clock.now() - 60_000, clock.now() + 86_400_000);
  await service.start();
  const [cancelled, expiring, queued] = await service.create(alice, [
    job(),
    job({ timeAllocation: { hours: 0, minutes: 1, seconds: 0 } }),
    job(),
  ]);
  const [broke] = await service.create(bob, [job({ replicas: 1 })]);
  for (const id of [cancelled!, expiring!, broke!]) {
    await eventually(() => cluster.volcano.job(id) !== undefined);
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await eventually(async () => (await state(id)) === 'RUNNING');
  }
  await eventually(() => cluster.volcano.job(queued!) !== undefined);
  await service.terminate(alice, [cancelled!, queued!]);
  await clock.advance(3 * 60_000);
  await service.monitor();
  assert.equal(await state(cancelled!), 'SUCCESS');
  assert.equal(await outcome(cancelled!), 'cancelled by alice');
  assert.equal(await outcome(queued!), 'never started (cancelled by alice)');
  assert.equal(await state(expiring!), 'EXPIRED');
  assert.equal(await outcome(expiring!), 'expired: its time allocation ran out');
  await eventually(async () => (await outcome(broke!)) !== undefined);
  assert.equal(await outcome(broke!), 'stopped: out of credits');
  for (const id of [cancelled!, expiring!, queued!, broke!]) assert.equal(cluster.volcano.job(id), undefined);
});

test('through the job service: a job the cluster lost while ucompute was down fails on restart', async (t) => {
  const cluster = await fakeCluster(t);
  const store = await openTestStore();
  const first = await serviceOn(t, cluster, store);
  await first.service.start();
  const [kept, lost] = await first.service.create(alice, [job(), job()]);
  await eventually(
    () => cluster.volcano.job(kept!) !== undefined && cluster.volcano.job(lost!) !== undefined,
  );
  await eventually(
    async () =>
      (await store.jobs.get(lost!))?.submitted === true && (await store.jobs.get(kept!))?.submitted === true,
  );
  await first.service.stop();
  await first.backend.close();
  const j = cluster.volcano.job(lost!);
  cluster.api.remove('jobs', j.metadata.namespace, j.metadata.name);
  const second = await serviceOn(t, cluster, store);
  await second.service.start();
  assert.equal(await second.state(lost!), 'FAILURE');
  assert.equal(
    (await second.service.retrieve(alice, lost!)).updates.at(-1)?.status,
    'ucompute lost track of this job',
  );
  assert.equal(await second.state(kept!), 'IN_QUEUE');
});

test("through the job service: a job that ended while none led is charged up to its pods' end, learnt before any charge", async (t) => {
  const cluster = await fakeCluster(t);
  const store = await openTestStore();
  const clock = manualClock(Date.now());
  const start = clock.now();
  await store.accounting.grant('user:alice', 'u1-standard', 1000, start - 60_000, start + 86_400_000);
  const first = await serviceOn(t, cluster, store, clock, true);
  await first.service.start();
  const [id] = await first.service.create(alice, [job({ replicas: 1 })]);
  await eventually(() => cluster.volcano.job(id!) !== undefined);
  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  await eventually(async () => (await first.state(id!)) === 'RUNNING');
  await first.service.stop();
  await first.backend.close();
  // It ends 30 s after it started, while no ucompute leads; one leads again 5 minutes on.
  cluster.volcano.finish(id!, [0], start + 30_000);
  await clock.advance(5 * 60_000);
  const second = await serviceOn(t, cluster, store, clock, true);
  await second.service.start();
  // Its first pass: charging before it learnt of the end, it would charge 5 periods for 30 s.
  await second.service.monitor();
  assert.equal(await second.state(id!), 'SUCCESS');
  const charged = async () =>
    (await store.accounting.charges('user:alice', 0, Number.MAX_SAFE_INTEGER)).map((c) => [
      c.chargeId,
      c.periods,
    ]);
  await eventually(async () => (await charged()).length > 0);
  assert.deepEqual(await charged(), [[`${id}:0-0`, 1]]);
});

test('ucompute serve --backend kubernetes says which cluster it uses and runs jobs there', async (t) => {
  const cluster = await fakeCluster(t, { autopilot: true });
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-serve-k8s-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // The example catalogue's mpi-hello runs as root, which this operator allows.
  await writeFile(
    join(dir, 'config.yml'),
    `kubernetes:\n  kubeconfig: ${cluster.kubeconfig}\nsecurity:\n  allowRootApps: true\n`,
  );
  const child = spawnServe(
    ['--backend', 'kubernetes', '--config', join(dir, 'config.yml'), '--data-dir', dir],
    CHILD_ENV,
  );
  t.after(() => child.kill('SIGTERM'));
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = await serving(child);
  assert.match(
    out,
    new RegExp(
      `\\(backend kubernetes: cluster ${cluster.api.url.replace(/[.]/g, '\\.')} \\(context fake\\), one namespace and queue per owner`,
    ),
  );
  const token = (await (await import('node:fs/promises')).readFile(join(dir, 'admin.token'), 'utf8')).trim();
  const response = await fetch(`${url}/api/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [job()] }),
  });
  assert.equal(response.status, 200, await response.clone().text());
  const { responses } = (await response.json()) as { responses: { id: string }[] };
  const id = responses[0]!.id;
  await eventually(async () => {
    const r = await fetch(`${url}/api/jobs/retrieve?id=${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return ((await r.json()) as { status: { state: string } }).status.state === 'SUCCESS';
    // A served child and the fake cluster's watches: over 15 s at a load of 25.
  }, 120_000);
});

test('a job whose gang Volcano admitted without ever creating its pods (Volcano 1.10 after an API-server restart) says so in its updates after minutes, and runs when they come', async (t) => {
  const cluster = await fakeCluster(t);
  const clock = manualClock(Date.UTC(2026, 10, 26, 20, 0));
  const { service, backend, state } = await serviceOn(t, cluster, undefined, clock);
  await service.start();
  const [stranded, witness] = await service.create(alice, [job({ replicas: 1 }), job({ replicas: 1 })]);
  await eventually(
    () => cluster.volcano.job(stranded!) !== undefined && cluster.volcano.job(witness!) !== undefined,
  );
  cluster.volcano.strand(stranded!);
  // The witness's PodGroup changes after the stranded one's, on the same watch: once its status is
  // reported, the backend has seen the stranded gang Inqueue (at 20:00 on the clock).
  cluster.volcano.unschedulable(witness!, '1/1 tasks in gang unschedulable: pod group is not ready');
  const statuses = async (id: string) =>
    (await service.retrieve(alice, id)).updates.map((u) => u.status ?? '');
  await eventually(async () => (await statuses(witness!)).some((s) => s.includes('1/1 tasks in gang')));
  const flagged = (all: string[]) => all.filter((s) => s.includes('Volcano has not created its pods'));

  await clock.advance(STRANDED_AFTER_MS - 1000);
  await backend.reconcile();
  assert.deepEqual(flagged(await statuses(stranded!)), [], 'not yet: enqueued pods may still come');
  await clock.advance(1000);
  await backend.reconcile();
  await eventually(async () => flagged(await statuses(stranded!)).length > 0);
  const [said] = flagged(await statuses(stranded!));
  assert.match(said!, /PodGroup has been Inqueue with no pods since 2026-11-26T20:00:00\.000Z/);
  assert.equal(await state(stranded!), 'IN_QUEUE');
  assert.deepEqual(flagged(await statuses(witness!)), [], 'a gang Volcano has not admitted is not stranded');

  // An administrator restarted Volcano's controller: the pods come and the job runs as any other.
  cluster.volcano.admit(stranded!);
  cluster.volcano.run(stranded!);
  await eventually(async () => (await state(stranded!)) === 'RUNNING');
  assert.equal((await statuses(stranded!)).at(-1), 'The job is running (1/1 ready)');
});
