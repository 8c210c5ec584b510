import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';

/** ucompute jobs (catalogue apps through every plugin) on the local backend, with real processes. */

const tools = await needs('bwrap', 'nft', 'ip');

async function setup(t: { after(fn: () => Promise<void>): void }, capacity = { cpu: 8, memoryInGigs: 32 }) {
  const {
    home: dir,
    storageRoot,
    store,
    service,
  } = await openTestService(t, {
    config: { capacity },
  });
  for (const user of ['alice', 'bob']) {
    await store.users.createUser(user, false);
    await store.accounting.grant(`user:${user}`, 'u1-standard', 1_000_000, 0, Number.MAX_SAFE_INTEGER);
  }
  const settled = async (id: string, ms = 20_000) => {
    for (let i = 0; i < ms / 20; i++) {
      const job = (await store.jobs.get(id))!;
      if (job.state === 'SUCCESS' || job.state === 'FAILURE' || job.state === 'EXPIRED') return job;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail(`job ${id} did not end: ${JSON.stringify(await store.jobs.updatesOf(id))}`);
  };
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
    const folder = join(storageRoot, 'home/alice/Jobs/Word count', id!);
    for (let i = 0; i < 100; i++) {
      if (await readFile(join(folder, 'stdout-0.log'), 'utf8').catch(() => '')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
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
    let lines: string[] = [];
    for (let i = 0; i < 100 && lines.length < 3; i++) {
      lines = (await readFile(stdout, 'utf8').catch(() => ''))
        .split('\n')
        .filter((l) => l.startsWith('hello'));
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(lines.map((l) => l.replace(/ on .*/, '')).sort(), [
      'hello from rank 0 of 3',
      'hello from rank 1 of 3',
      'hello from rank 2 of 3',
    ]);
  },
);

test('expiry stops a running job and leaves nothing of it behind', tools, async (t) => {
  const { store, service, settled } = await setup(t);
  const [id] = await service.create({ username: 'alice', admin: false }, [
    {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      replicas: 2,
      timeAllocation: { hours: 0, minutes: 0, seconds: 1 },
    },
  ]);
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
    const { store, service, settled } = await setup(t, { cpu: 1, memoryInGigs: 32 });
    // Each job holds the one CPU for its time limit: long enough for alice's backlog to reach the
    // backend's queue while her first job runs, on a slow machine too.
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
    for (let i = 0; i < 250 && !(await backlogQueued()); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const [bob] = await service.create({ username: 'bob', admin: false }, [terminal]);
    const jobs = [...alice, bob!];
    for (const id of jobs) assert.equal((await settled(id)).state, 'EXPIRED');
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
