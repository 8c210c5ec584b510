import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend, BackendEvent } from '../src/jobs/backend.ts';
import { quotaWatch } from '../src/jobs/quota-watch.ts';
import { createJobService } from '../src/jobs/service.ts';
import { buildServer } from '../src/server/app.ts';
import { type QuotaSettings, storageQuotas } from '../src/storage/quota.ts';
import { env } from './support/fixtures.ts';
import { type ManualClock, manualClock } from './support/manual-clock.ts';
import { rejectsWith } from './support/service.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

// The audit's disk filler: nothing bounded what one user put in storage. Each owner's drive (its
// job folders and Trash included) now has a quota, checked where bytes come in: uploads, new
// folders, copies and moves into another drive, and new jobs; jobs that fill their folders are
// found by the periodic measure, and the running jobs are told.

const KiB = 1024;
const MiB = 1024 * KiB;
const SETTINGS: QuotaSettings = {
  defaultBytes: 1 * MiB,
  owners: { 'user:bob': null, 'project:climate': 256 * KiB },
};
const job = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  replicas: 1,
  timeAllocation: null,
};

type Who = 'alice' | 'bob';

async function world(
  t: { after(fn: () => Promise<void>): void },
  o: { backend?: Backend; clock?: ManualClock } = {},
) {
  const root = await mkdtemp(join(tmpdir(), 'ucompute-quota-'));
  const store = await openTestStore();
  for (const name of ['alice', 'bob']) await store.users.createUser(name, false);
  await store.users.createProject('climate', 'Climate');
  await store.users.setMember('climate', 'alice', 'PI');
  const tokens = {
    alice: await store.users.createToken('alice', 'test'),
    bob: await store.users.createToken('bob', 'test'),
  };
  const quotas = storageQuotas({ root, settings: SETTINGS, now: Date.now });
  const backend = o.backend ?? dryBackend({ runForMs: null });
  const service = createJobService({
    store,
    env: env(),
    backend,
    quotas,
    requireCredits: false,
    submitRetryMs: 1000,
    ...(o.clock ? { clock: o.clock } : {}),
  });
  const app = await buildServer({ service, store, env: env(), backend, storageRoot: root, quotas });
  t.after(async () => {
    await app.close();
    await service.stop();
    await backend.close();
    await store.close();
    await rm(root, { recursive: true, force: true });
  });
  const call = (who: Who, options: InjectOptions) =>
    app.inject({ ...options, headers: { authorization: `Bearer ${tokens[who]}`, ...options.headers } });
  const q = (path: string) => `path=${encodeURIComponent(path)}`;
  const watch = quotaWatch({
    store,
    quotas,
    addStatus: service.leader.addStatus,
    hold: service.leader.holdForQuota,
    release: service.leader.releaseFromQuota,
  });
  return {
    root,
    store,
    service,
    quotas,
    watch,
    call,
    upload: (who: Who, path: string, body: string | Buffer | Readable, offset = 0) =>
      call(who, {
        method: 'PUT',
        url: `/api/files/upload?${q(path)}&offset=${offset}`,
        headers: { 'content-type': 'application/octet-stream' },
        payload: body,
      }),
    post: (who: Who, what: 'folder' | 'move' | 'copy' | 'trash' | 'trash/empty', payload: object) =>
      call(who, { method: 'POST', url: `/api/files/${what}`, payload }),
    usage: async (who: Who, drive: string) => {
      const r = await call(who, { method: 'GET', url: '/api/files/usage' });
      assert.equal(r.statusCode, 200, r.body);
      return r.json().items.find((u: { drive: string }) => u.drive === drive);
    },
    /** Bytes written into the drive behind the API's back, as a job writes in its folder. */
    fill: async (path: string, bytes: number) => {
      await mkdir(join(root, path, '..'), { recursive: true });
      await writeFile(join(root, path), Buffer.alloc(bytes, 1));
    },
    size: (path: string) =>
      stat(join(root, path)).then(
        (s) => s.size,
        () => undefined,
      ),
  };
}

test('an upload past the owner’s quota is refused whole (402 naming the quota), in one piece or continued', async (t) => {
  const w = await world(t);
  assert.equal((await w.upload('alice', '/home/alice/a.bin', Buffer.alloc(600 * KiB))).statusCode, 200);
  const usage = await w.usage('alice', '/home/alice');
  assert.equal(usage.owner, 'user:alice');
  assert.equal(usage.quotaBytes, MiB);
  assert.ok(usage.usedBytes >= 600 * KiB && usage.usedBytes < MiB, JSON.stringify(usage));

  const refused = await w.upload('alice', '/home/alice/b.bin', Buffer.alloc(600 * KiB));
  assert.equal(refused.statusCode, 402, refused.body);
  assert.match(
    refused.json().message,
    /would pass the storage quota of user alice: \/home\/alice .* of its 1\.0 MiB/,
  );
  assert.equal(await w.size('home/alice/b.bin'), undefined, 'the refused upload left no file');
  // Sent without a length, in pieces: cut off once past the room left.
  const streamed = await w.upload(
    'alice',
    '/home/alice/c.bin',
    Readable.from([Buffer.alloc(300 * KiB), Buffer.alloc(300 * KiB)]),
  );
  assert.equal(streamed.statusCode, 402, streamed.body);
  assert.equal(await w.size('home/alice/c.bin'), undefined);
  // A continued upload that passes it keeps what was there before.
  assert.equal((await w.upload('alice', '/home/alice/d.bin', Buffer.alloc(10 * KiB))).statusCode, 200);
  assert.equal(
    (await w.upload('alice', '/home/alice/d.bin', Buffer.alloc(600 * KiB), 10 * KiB)).statusCode,
    402,
  );
  assert.equal(await w.size('home/alice/d.bin'), 10 * KiB);
  assert.ok((await w.usage('alice', '/home/alice')).usedBytes < MiB, 'refused bytes are not counted');

  // Replacing a file frees what it held: the same 600 KiB again fits.
  assert.equal((await w.upload('alice', '/home/alice/a.bin', Buffer.alloc(600 * KiB))).statusCode, 200);
  // bob has no limit; the project has its own.
  assert.equal((await w.upload('bob', '/home/bob/big.bin', Buffer.alloc(3 * MiB))).statusCode, 200);
  assert.equal((await w.usage('bob', '/home/bob')).quotaBytes, null);
  const project = await w.upload('alice', '/projects/climate/x.bin', Buffer.alloc(300 * KiB));
  assert.equal(project.statusCode, 402);
  assert.match(project.json().message, /storage quota of project climate/);
});

test('copies and moves into another drive count for the target’s owner; an owner over its quota makes nothing until it frees space', async (t) => {
  const w = await world(t);
  assert.equal((await w.upload('alice', '/home/alice/data.bin', Buffer.alloc(600 * KiB))).statusCode, 200);
  const copy = await w.post('alice', 'copy', { from: '/home/alice/data.bin', to: '/home/alice/copy.bin' });
  assert.equal(copy.statusCode, 402, copy.body);
  assert.equal(await w.size('home/alice/copy.bin'), undefined);
  const move = await w.post('alice', 'move', {
    from: '/home/alice/data.bin',
    to: '/projects/climate/data.bin',
  });
  assert.equal(move.statusCode, 402, move.body);
  assert.match(move.json().message, /project climate/);
  assert.equal(await w.size('home/alice/data.bin'), 600 * KiB, 'the refused move left the file where it was');
  // Within the drive a move brings nothing in.
  assert.equal(
    (await w.post('alice', 'move', { from: '/home/alice/data.bin', to: '/home/alice/d.bin' })).statusCode,
    200,
  );

  // A job fills alice's home behind the API; the next measure sees it.
  await w.fill('home/alice/Jobs/Word count/j1/out.bin', 600 * KiB);
  await w.quotas.rescan(['/home/alice']);
  for (const r of [
    await w.post('alice', 'folder', { path: '/home/alice/new' }),
    await w.upload('alice', '/home/alice/empty.txt', ''),
  ]) {
    assert.equal(r.statusCode, 402, r.body);
    assert.match(r.json().message, /the storage quota of user alice is used up: .*empty the Trash/);
  }
  await rejectsWith(
    w.service.create({ username: 'alice', admin: false }, [job]),
    402,
    /the job cannot start: the storage quota of user alice is used up/,
  );
  // Other owners are not held back.
  assert.equal((await w.service.create({ username: 'bob', admin: false }, [job])).length, 1);
  assert.equal(
    (await w.service.create({ username: 'alice', admin: false }, [job], { project: 'climate' })).length,
    1,
  );

  // Trashed, it still counts; emptied, it does not.
  assert.equal((await w.post('alice', 'trash', { path: '/home/alice/Jobs' })).statusCode, 200);
  assert.equal((await w.post('alice', 'folder', { path: '/home/alice/new' })).statusCode, 402);
  assert.equal((await w.post('alice', 'trash/empty', { drive: '/home/alice' })).statusCode, 200);
  assert.equal((await w.post('alice', 'folder', { path: '/home/alice/new' })).statusCode, 200);
  assert.equal((await w.service.create({ username: 'alice', admin: false }, [job])).length, 1);
});

test('a running job whose owner goes over the quota is told so once, and keeps running', async (t) => {
  const w = await world(t);
  const alice = { username: 'alice', admin: false };
  const [id] = await w.service.create(alice, [job]);
  await until(async () => (await w.service.retrieve(alice, id!)).status.state === 'RUNNING', {
    describe: 'the job runs',
  });
  const { watch } = w;
  const notices = async () =>
    (await w.store.jobs.updatesOf(id!)).filter((u) => u.status?.startsWith('Storage quota used up'));
  // A check a minute over every active job reads their rows without JSON, not whole rows.
  const { active } = w.store.jobs;
  let wholeRows = 0;
  w.store.jobs.active = () => {
    wholeRows++;
    return active();
  };
  t.after(() => {
    w.store.jobs.active = active;
  });
  await watch.check();
  assert.equal(wholeRows, 0);
  assert.equal((await notices()).length, 0, 'under its quota: nothing said');
  await w.fill(`home/alice/Jobs/MPI hello/${id}/out.bin`, 2 * MiB);
  await watch.check();
  await watch.check();
  const told = await notices();
  assert.equal(told.length, 1, JSON.stringify(told));
  assert.match(
    told[0]!.status!,
    /storage quota of user alice is used up: \/home\/alice .* holds 2\.0 MiB of its 1\.0 MiB/,
  );
  assert.match(told[0]!.status!, /this job keeps running/);
  assert.equal((await w.service.retrieve(alice, id!)).status.state, 'RUNNING');
  await rejectsWith(w.service.create(alice, [job]), 402, /storage quota of user alice/);
});

/** A dry backend whose machine is full: what it is given stays queued until `open()`. */
function fullMachine() {
  const dry = dryBackend({ runForMs: null });
  let open = false;
  const listeners: ((e: BackendEvent) => void)[] = [];
  const backend: Backend = {
    ...dry,
    onEvent(listener) {
      listeners.push(listener);
      dry.onEvent((e) => {
        if (open || e.state !== 'RUNNING') listener(e);
      });
    },
  };
  return {
    backend,
    open: () => {
      open = true;
    },
  };
}

const alice = { username: 'alice', admin: false };

test('a queued job whose owner went over the quota is held, saying why, and goes back to the queue once space is freed', async (t) => {
  const machine = fullMachine();
  const w = await world(t, { backend: machine.backend });
  const [id] = await w.service.create(alice, [job]);
  await until(async () => (await w.store.jobs.get(id!))?.submitted === true, {
    describe: 'the job is in the backend’s queue',
  });
  await w.fill('home/alice/results.bin', 2 * MiB);
  await w.watch.check();
  const held = await w.service.retrieve(alice, id!);
  assert.equal(held.status.state, 'SUSPENDED', 'it does not start while alice is over');
  assert.match(
    held.updates.at(-1)!.status!,
    /^Held: the storage quota of user alice is used up: \/home\/alice .* holds 2\.0 MiB of its 1\.0 MiB; delete files or empty the Trash .* The job has not started; it goes back to the queue by itself/,
  );
  assert.equal((await machine.backend.knownJobs()).has(id!), false, 'out of the backend’s queue');
  await rejectsWith(w.service.unsuspend(alice, [id!]), 402, /cannot start: the storage quota of user alice/);
  await w.watch.check();
  assert.equal((await w.service.retrieve(alice, id!)).updates.length, held.updates.length, 'said once');

  await rm(join(w.root, 'home/alice/results.bin'));
  machine.open();
  await w.watch.check();
  await until(async () => (await w.service.retrieve(alice, id!)).status.state === 'RUNNING', {
    describe: 'the job runs once alice has room',
  });
  const statuses = (await w.service.retrieve(alice, id!)).updates.map((u) => u.status);
  assert.ok(statuses.includes('The storage quota of its owner has room again: the job is back in the queue'));
});

test('a person’s suspend is not undone by the quota watch', async (t) => {
  const w = await world(t);
  const [id] = await w.service.create(alice, [job]);
  await until(async () => (await w.service.retrieve(alice, id!)).status.state === 'RUNNING', {
    describe: 'the job runs',
  });
  await w.service.suspend(alice, [id!]);
  await w.watch.check();
  assert.equal((await w.service.retrieve(alice, id!)).status.state, 'SUSPENDED');
});

test('a job whose submission is tried again after its owner went over is held, not started', async (t) => {
  const clock = manualClock(Date.now());
  const dry = dryBackend({ runForMs: null, clock });
  let submits = 0;
  const backend: Backend = {
    ...dry,
    async submit(jobId, build) {
      submits++;
      if (submits === 1) throw new Error('the API server is restarting');
      await dry.submit(jobId, build);
    },
  };
  const w = await world(t, { backend, clock });
  const [id] = await w.service.create(alice, [job]);
  await until(() => submits === 1, { describe: 'the backend refused the first submission' });
  await w.fill('home/alice/results.bin', 2 * MiB);
  await w.quotas.rescan(['/home/alice']);
  await clock.advance(1000);
  await until(async () => (await w.service.retrieve(alice, id!)).status.state === 'SUSPENDED', {
    describe: 'the job is held',
  });
  assert.equal(submits, 1, 'never handed to the backend while alice is over');
  assert.match(
    (await w.service.retrieve(alice, id!)).updates.at(-1)!.status!,
    /^Held: the storage quota of user alice/,
  );
});
