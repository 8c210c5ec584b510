import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Clock } from '../src/model/clock.ts';
import { openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { manualClock } from './support/manual-clock.ts';
import { until } from './support/until.ts';

/** ucompute jobs (catalogue apps through every plugin) on the local backend, with real processes. */

const tools = await needs('bwrap', 'nft', 'ip');

async function setup(
  t: { after(fn: () => Promise<void>): void },
  capacity = { cpu: 8, memoryInGigs: 32 },
  clock?: Clock,
) {
  const {
    home: dir,
    storageRoot,
    store,
    service,
  } = await openTestService(t, {
    config: { capacity },
    ...(clock ? { clock } : {}),
  });
  for (const user of ['alice', 'bob']) {
    await store.users.createUser(user, false);
    await store.accounting.grant(`user:${user}`, 'u1-standard', 1_000_000, 0, Number.MAX_SAFE_INTEGER);
  }
  const settled = (id: string, timeout = 20_000) =>
    until(
      async () => {
        const job = (await store.jobs.get(id))!;
        return (job.state === 'SUCCESS' || job.state === 'FAILURE' || job.state === 'EXPIRED') && job;
      },
      { describe: `job ${id} ends`, timeout },
    );
  return { dir, storageRoot, store, service, settled };
}

const wordCount = (path: string) => ({
  application: { name: 'word-count', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: {
    input: { type: 'file' as const, path, readOnly: true },
    top: { type: 'integer' as const, value: 2 },
  },
});

test(
  'a catalogue app runs through every plugin: input mounted read-only, output and logs in the job folder',
  tools,
  async (t) => {
    const { storageRoot, store, service, settled } = await setup(t);
    await mkdir(join(storageRoot, 'home/alice'), { recursive: true });
    await writeFile(join(storageRoot, 'home/alice/words.txt'), 'b a b c b a\n');
    const [id] = await service.create({ username: 'alice', admin: false }, [
      wordCount('/home/alice/words.txt'),
    ]);
    const job = await settled(id!);
    assert.equal(job.state, 'SUCCESS', JSON.stringify(await store.jobs.updatesOf(id!)));
    assert.deepEqual(job.exitCodes, { 0: 0 });
    // The output is saved in the job folder before the job's end is told.
    const folder = join(storageRoot, 'home/alice/Jobs/Word count', id!);
    assert.equal(
      (await readFile(join(folder, 'stdout-0.log'), 'utf8')).replace(/ +/g, ' ').trim(),
      '3 b\n 2 a'.replace(/ +/g, ' '),
    );
  },
);

test(
  'mpi-hello with one replica runs every process on it, without ssh, and ends',
  await needs('bwrap', 'nft', 'ip', 'mpiexec'),
  async (t) => {
    const { storageRoot, store, service, settled } = await setup(t);
    const [id] = await service.create({ username: 'alice', admin: false }, [
      {
        application: { name: 'mpi-hello', version: '1.0' },
        product: { id: 'u1-standard-2', category: 'u1-standard' },
        parameters: { slots: { type: 'integer', value: 3 } },
        timeAllocation: { hours: 0, minutes: 5, seconds: 0 },
      },
    ]);
    const job = await settled(id!, 60_000);
    assert.equal(job.state, 'SUCCESS', JSON.stringify(await store.jobs.updatesOf(id!)));
    assert.deepEqual(job.exitCodes, { 0: 0 }, JSON.stringify(await store.jobs.updatesOf(id!)));
    const stdout = join(storageRoot, 'home/alice/Jobs/MPI hello', id!, 'stdout-0.log');
    const lines = (await readFile(stdout, 'utf8')).split('\n').filter((l) => l.startsWith('hello'));
    assert.deepEqual(lines.map((l) => l.replace(/ on .*/, '')).sort(), [
      'hello from rank 0 of 3',
      'hello from rank 1 of 3',
      'hello from rank 2 of 3',
    ]);
  },
);

test('expiry stops a running job and leaves nothing of it behind', tools, async (t) => {
  const clock = manualClock();
  const { store, service, settled } = await setup(t, undefined, clock);
  const [id] = await service.create({ username: 'alice', admin: false }, [
    {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      replicas: 2,
      timeAllocation: { hours: 0, minutes: 0, seconds: 1 },
    },
  ]);
  await until(async () => (await store.jobs.get(id!))!.state === 'RUNNING', {
    describe: 'the job runs',
    timeout: 30_000,
  });
  // Its time started when it ran (the clock has not moved since): checked every 50 ms, it is up after 1 s.
  assert.equal((await store.jobs.get(id!))!.startedAt, clock.now());
  await clock.advance(999);
  assert.equal((await store.jobs.get(id!))!.state, 'RUNNING', 'not before its time is up');
  await clock.advance(100);
  const job = await settled(id!);
  assert.equal(job.state, 'EXPIRED', JSON.stringify(await store.jobs.updatesOf(id!)));
  const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  assert.ok(!ps.includes(`j-${id}`), 'no process of the job');
  assert.ok(
    !execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).includes(id!),
    'no network namespace',
  );
  const cgroups = execFileSync('find', ['/sys/fs/cgroup/memory', '-maxdepth', '3', '-name', `*${id}*`], {
    encoding: 'utf8',
  });
  assert.equal(cgroups.trim(), '', 'no cgroup');
});

test(
  'two owners share a busy machine fairly: a newcomer starts before the first owner’s backlog',
  tools,
  async (t) => {
    // Time stands still until bob has arrived: alice's first job holds the one CPU meanwhile.
    const clock = manualClock();
    const { store, service } = await setup(t, { cpu: 1, memoryInGigs: 32 }, clock);
    // Each job holds the one CPU for its time limit.
    const terminal = {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      timeAllocation: { hours: 0, minutes: 0, seconds: 3 },
    };
    const alice = await service.create({ username: 'alice', admin: false }, [terminal, terminal, terminal]);
    const waitedInQueue = async (id: string) =>
      (await store.jobs.updatesOf(id)).some((u) =>
        /^In the queue, position \d: waiting for 1 CPU and 2 GiB of memory/.test(u.status ?? ''),
      );
    // Bob arrives while alice uses the machine and has a backlog (which of her jobs runs first is the
    // scheduler's choice: they were submitted together).
    const backlogQueued = async () => {
      let running = 0;
      let waited = 0;
      for (const id of alice) {
        if ((await store.jobs.get(id))!.state === 'RUNNING') running++;
        if (await waitedInQueue(id)) waited++;
      }
      return running > 0 && waited === 2;
    };
    await until(backlogQueued, { describe: "alice's backlog waits in the queue", timeout: 30_000 });
    const [bob] = await service.create({ username: 'bob', admin: false }, [terminal]);
    await until(() => waitedInQueue(bob!), { describe: 'bob waits in the queue' });
    // Then the clock moves, half a second at a time, until every job has run out of time.
    const jobs = [...alice, bob!];
    const expired = async () => {
      for (const id of jobs) if ((await store.jobs.get(id))!.state !== 'EXPIRED') return false;
      return true;
    };
    await until(
      async () => {
        if (await expired()) return true;
        await clock.advance(500);
        return false;
      },
      { describe: 'every job runs out of time, one after the other', timeout: 60_000 },
    );
    const started: { id: string; at: number }[] = [];
    for (const id of jobs) started.push({ id, at: (await store.jobs.get(id))!.startedAt! });
    const inOrder = started.sort((a, b) => a.at - b.at).map((s) => s.id);
    assert.deepEqual(
      inOrder.map((id) => (id === bob ? 'bob' : 'alice')),
      ['alice', 'bob', 'alice', 'alice'],
      'bob goes as soon as the one CPU is free, before alice’s backlog',
    );
    // The last to start was told where it stood while it waited.
    const last = inOrder.at(-1)!;
    assert.ok(
      await waitedInQueue(last),
      (await store.jobs.updatesOf(last)).map((u) => u.status ?? '').join(' | '),
    );
  },
);
