import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend } from '../src/jobs/backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { ValidationError } from '../src/model/errors.ts';
import type { JobBuild } from '../src/plugins/plugin.ts';
import type { JobStorage } from '../src/storage/job-storage.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { rejectsWith } from './support/service.ts';
import { jobCount, openTestStore, STORE_KINDS, type StoreKind, testStoreLocation } from './support/store.ts';
import { until } from './support/until.ts';

const T0 = Date.UTC(2025, 0, 1);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const alice = { username: 'alice', admin: false };
const bob = { username: 'bob', admin: false };
const STANDARD_2 = { id: 'u1-standard-2', category: 'u1-standard' };

/** mpi-hello needs no parameters; its tool's default time allocation is two hours. */
const mpi = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: STANDARD_2,
  ...extra,
});
const hours = (h: number) => ({ hours: h, minutes: 0, seconds: 0 });
const minutes = (m: number) => ({ hours: 0, minutes: m, seconds: 0 });

type Operation = 'submit' | 'cancel';

/**
 * A backend that logs every call (`submit:<id>` when asked, `submitted:<id>` when the inner
 * backend took it, `cancel:<id>`) and can hold submissions or cancellations until released.
 */
function recording(inner: Backend) {
  const log: string[] = [];
  const gates: Partial<Record<Operation, Promise<void>>> = {};
  return {
    ...inner,
    log,
    async submit(id: string, build: JobBuild) {
      log.push(`submit:${id}`);
      await gates.submit;
      await inner.submit(id, build);
      log.push(`submitted:${id}`);
    },
    async cancel(id: string) {
      log.push(`cancel:${id}`);
      await gates.cancel;
      await inner.cancel(id);
    },
    /** Holds every later call of `op` until the returned function is called. */
    hold(op: Operation): () => void {
      let release!: () => void;
      gates[op] = new Promise((resolve) => {
        release = resolve;
      });
      return () => {
        delete gates[op];
        release();
      };
    },
    calls(op: string, id: string): number {
      return log.filter((entry) => entry === `${op}:${id}`).length;
    },
  };
}

interface HarnessOptions {
  store?: Store;
  backend?: Backend;
  storage?: JobStorage;
  runForMs?: number | null;
}

async function harnessOn(kind: StoreKind, o: HarnessOptions = {}) {
  const clock = manualClock(T0);
  const backend = recording(o.backend ?? dryBackend({ runForMs: o.runForMs ?? null, clock }));
  const store = o.store ?? (await openTestStore(kind));
  const service = createJobService({
    store,
    env: env(),
    backend,
    clock,
    requireCredits: false,
    ...(o.storage ? { storage: o.storage } : {}),
  });
  const job = async (id: string) => await service.retrieve(alice, id);
  const state = async (id: string) => (await job(id)).status.state;
  const rows = () => jobCount(store);
  const lastStatus = async (id: string) => (await job(id)).updates.at(-1)?.status;
  /** Creates one job and waits for the backend to report it running. */
  const running = async (spec: unknown = mpi()): Promise<string> => {
    const [id] = await service.create(alice, [spec]);
    await until(async () => (await state(id!)) === 'RUNNING', { describe: `${id} runs` });
    return id!;
  };
  return { clock, backend, store, service, job, state, rows, lastStatus, running };
}

// The job service's suite, on each store.
for (const kind of STORE_KINDS) {
  describe(`on ${kind}`, () => {
    const harness = (o: HarnessOptions = {}) => harnessOn(kind, o);

    describe('create', () => {
      test('validates every item before writing anything', async () => {
        const h = await harness();
        const bad = mpi({ parameters: { slots: { type: 'integer', value: 0 } } });
        await assert.rejects(h.service.create(alice, [mpi(), bad, mpi()]), (e: unknown) => {
          assert.ok(e instanceof ValidationError);
          assert.ok(e.issues.length > 0);
          for (const issue of e.issues)
            assert.match(issue.path, /^items\[1\]\.specification\.parameters\.slots/);
          return true;
        });
        await assert.rejects(h.service.create(alice, []), ValidationError);
        await assert.rejects(h.service.create(alice, { application: 'x' }), ValidationError);
        // Give a wrongly scheduled write every chance to happen.
        for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
        assert.equal(await h.rows(), 0);
        assert.deepEqual(h.backend.log, []);
      });

      test('an Idempotency-Key repeats the same ids and creates nothing new', async () => {
        const h = await harness();
        const items = [mpi(), mpi({ name: 'second' })];
        const first = await h.service.create(alice, items, { idempotencyKey: 'k1' });
        assert.equal(first.length, 2);
        const again = await h.service.create(alice, structuredClone(items), { idempotencyKey: 'k1' });
        assert.deepEqual(again, first);
        assert.equal(await h.rows(), 2);

        await rejectsWith(h.service.create(alice, [mpi()], { idempotencyKey: 'k1' }), 409, /Idempotency-Key/);
        assert.equal(await h.rows(), 2);

        // Keys belong to their user.
        const bobs = await h.service.create(bob, items, { idempotencyKey: 'k1' });
        assert.notDeepEqual(bobs, first);
        assert.equal(await h.rows(), 4);
        await until(async () => (await h.store.jobs.active()).every((r) => r.submitted), {
          describe: 'all submitted',
        });
        for (const id of [...first, ...bobs]) assert.equal(h.backend.calls('submit', id), 1, id);
      });

      test('concurrent requests with one Idempotency-Key create once and submit once', async () => {
        const h = await harness();
        const [a, b] = await Promise.all([
          h.service.create(alice, [mpi()], { idempotencyKey: 'same' }),
          h.service.create(alice, [mpi()], { idempotencyKey: 'same' }),
        ]);
        assert.deepEqual(a, b);
        assert.equal(await h.rows(), 1);
        await until(async () => (await h.state(a![0]!)) === 'RUNNING', { describe: 'running' });
        for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
        assert.equal(h.backend.calls('submit', a![0]!), 1);
      });

      test('concurrent requests with one Idempotency-Key and different bodies: one lands, the other gets 409', async () => {
        const h = await harness();
        // Which one is first is the race's: the one whose preparation ends first takes the key.
        const results = await Promise.allSettled([
          h.service.create(alice, [mpi()], { idempotencyKey: 'same' }),
          h.service.create(alice, [mpi({ name: 'other' })], { idempotencyKey: 'same' }),
        ]);
        assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
        const refused = results.find((r) => r.status === 'rejected');
        await rejectsWith(Promise.reject(refused?.reason), 409);
        assert.equal(await h.rows(), 1);
      });

      test('50 concurrent single-item creates all land, with distinct ids, in one commit', async () => {
        const h = await harness();
        // Count the transactions that insert jobs: a group commit uses one for all of them.
        const transaction = h.store.transaction.bind(h.store);
        let next = 0;
        const inserts = new Set<number>();
        h.store.transaction = (fn, options) =>
          transaction((tx) => {
            const current = ++next;
            const insert = tx.jobs.insert.bind(tx.jobs);
            const jobs = {
              ...tx.jobs,
              insert: (job: Parameters<typeof insert>[0]) => {
                inserts.add(current);
                return insert(job);
              },
            };
            return fn({ ...tx, jobs });
          }, options);

        const results = await Promise.all(
          Array.from({ length: 50 }, async (_, i) => h.service.create(alice, [mpi({ name: `job ${i}` })])),
        );
        const ids = results.flat();
        assert.equal(ids.length, 50);
        assert.equal(new Set(ids).size, 50);
        assert.equal(await h.rows(), 50);
        // SQLite answers the requests' reads at once, so all 50 wait for the same commit; PostgreSQL's
        // answers come over the network, one batch each millisecond (its group commit is measured in
        // bench/, not here).
        if (kind === 'sqlite') assert.equal(inserts.size, 1);
        for (const [i, id] of ids.entries()) assert.equal((await h.job(id)).specification.name, `job ${i}`);
        await until(async () => (await h.store.jobs.active()).every((r) => r.submitted), {
          describe: 'all submitted',
        });
        for (const id of ids) assert.equal(h.backend.calls('submit', id), 1);
      });
    });

    describe('a job on the dry backend', () => {
      test('goes IN_QUEUE → RUNNING → SUCCESS with exit codes, output folder and JobParameters.json', async () => {
        const files = new Map<string, string>();
        const folders: string[] = [];
        const storage: JobStorage = {
          async ensureFolder(path) {
            folders.push(path);
          },
          async writeFile(path, content) {
            files.set(path, content);
          },
        };
        const h = await harness({ storage, runForMs: 0 });
        const [id] = await h.service.create(alice, [mpi({ replicas: 2 })]);
        await until(async () => (await h.state(id!)) === 'SUCCESS', { describe: 'success' });

        const job = h.job(id!);
        const folder = `/home/alice/Jobs/MPI hello/${id}`;
        assert.deepEqual(
          (await job).updates.map(
            (u) => u.state ?? (u.outputFolder !== undefined ? 'outputFolder' : 'status'),
          ),
          ['IN_QUEUE', 'outputFolder', 'RUNNING', 'SUCCESS'],
        );
        assert.equal((await job).updates.at(-1)!.status, 'The job finished (exit code 0 on every rank)');
        assert.deepEqual((await job).status.exitCode, { '0': 0, '1': 0 });
        assert.equal((await job).status.startedAt, T0);
        assert.deepEqual((await job).output, { outputFolder: folder });
        assert.deepEqual(folders, [folder]);
        const parameters = JSON.parse(files.get(`${folder}/JobParameters.json`) ?? '{}') as Record<
          string,
          unknown
        >;
        assert.equal(parameters.jobId, id);
        assert.equal(parameters.replicas, 2);
        assert.deepEqual(parameters.application, { name: 'mpi-hello', version: '1.0' });
        assert.equal(h.backend.calls('submit', id!), 1);
      });

      test('terminate ends it as SUCCESS "The job was cancelled"; a second terminate changes nothing', async () => {
        const h = await harness();
        const id = await h.running();
        await h.service.terminate(alice, [id]);
        assert.equal(await h.state(id), 'SUCCESS');
        assert.equal(await h.lastStatus(id), 'The job was cancelled');
        assert.equal((await h.backend.knownJobs()).has(id), false);
        await h.service.terminate(alice, [id]);
        await rejectsWith(h.service.terminate(bob, [id]), 404);
        assert.equal((await h.job(id)).updates.length, 4);
      });

      test('a job cancelled while the backend takes it does not run on', async () => {
        const h = await harness();
        const release = h.backend.hold('submit');
        const [id] = await h.service.create(alice, [mpi()]);
        await until(async () => h.backend.calls('submit', id!) === 1, { describe: 'submit called' });
        await h.service.terminate(alice, [id!]);
        release();
        await until(async () => h.backend.calls('submitted', id!) === 1, { describe: 'submitted' });
        await until(async () => h.backend.log.at(-1) === `cancel:${id}`, {
          describe: 'cancelled after submission',
        });
        assert.equal((await h.backend.knownJobs()).has(id!), false);
        assert.equal(await h.state(id!), 'SUCCESS');
      });
    });

    describe('time limits', () => {
      test('the clock starts at RUNNING: a job queued for an hour still gets its full allocation', async () => {
        const h = await harness();
        const release = h.backend.hold('submit');
        const [id] = await h.service.create(alice, [mpi({ timeAllocation: hours(1) })]);
        await until(async () => h.backend.calls('submit', id!) === 1, { describe: 'submit called' });
        await h.clock.advanceTo(T0 + HOUR);
        await h.service.monitor();
        assert.equal(await h.state(id!), 'IN_QUEUE');
        release();
        await until(async () => (await h.state(id!)) === 'RUNNING', { describe: 'running' });
        const started = T0 + HOUR;
        assert.equal((await h.job(id!)).status.startedAt, started);
        assert.equal((await h.job(id!)).status.expiresAt, started + HOUR);

        await h.clock.advanceTo(started + HOUR - 1);
        await h.service.monitor();
        assert.equal(await h.state(id!), 'RUNNING');
        await h.clock.advanceTo(started + HOUR);
        await h.service.monitor();
        assert.equal(await h.state(id!), 'EXPIRED');
        assert.equal(await h.lastStatus(id!), 'The job ran out of time');
        assert.equal((await h.backend.knownJobs()).has(id!), false);
        await rejectsWith(h.service.extend(alice, [{ jobId: id!, requestedTime: hours(1) }]), 409);
      });

      test('the tool default allocation applies when none is asked for', async () => {
        const h = await harness();
        const id = await h.running();
        assert.equal((await h.job(id)).status.expiresAt, T0 + 2 * HOUR);
      });

      test('a job without a limit never expires and cannot be extended', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: null }));
        assert.equal((await h.job(id)).status.expiresAt, undefined);
        await h.clock.advanceTo(T0 + 1000 * 24 * HOUR);
        await h.service.monitor();
        assert.equal(await h.state(id), 'RUNNING');
        await rejectsWith(
          h.service.extend(alice, [{ jobId: id, requestedTime: hours(1) }]),
          400,
          /items\[0\]\.jobId.*no time limit/,
        );
        assert.equal((await h.job(id)).updates.length, 3);
      });

      test('two extends in the same millisecond both count, right after the start', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: hours(1) }));
        assert.equal(h.clock.now(), T0);
        await Promise.all([
          h.service.extend(alice, [{ jobId: id, requestedTime: minutes(30) }]),
          h.service.extend(alice, [{ jobId: id, requestedTime: minutes(30) }]),
        ]);
        const job = h.job(id);
        assert.equal((await job).status.expiresAt, T0 + 2 * HOUR);
        assert.deepEqual(
          (await job).updates.flatMap((u) => u.newTimeAllocation ?? []),
          [90 * MINUTE, 2 * HOUR],
        );
      });

      test('an extend while queued counts once the job runs', async () => {
        const h = await harness();
        const release = h.backend.hold('submit');
        const [id] = await h.service.create(alice, [mpi({ timeAllocation: hours(1) })]);
        await h.service.extend(alice, [{ jobId: id!, requestedTime: minutes(15) }]);
        await h.clock.advanceTo(T0 + 5 * MINUTE);
        release();
        await until(async () => (await h.state(id!)) === 'RUNNING', { describe: 'running' });
        assert.equal((await h.job(id!)).status.expiresAt, T0 + 5 * MINUTE + 75 * MINUTE);
      });

      test('an extend just before the deadline keeps the job running', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: hours(1) }));
        await h.clock.advanceTo(T0 + HOUR - 1);
        await h.service.extend(alice, [{ jobId: id, requestedTime: minutes(10) }]);
        await h.clock.advanceTo(T0 + HOUR + 1);
        await h.service.monitor();
        assert.equal(await h.state(id), 'RUNNING');
        assert.equal((await h.job(id)).status.expiresAt, T0 + 70 * MINUTE);
        await h.clock.advanceTo(T0 + 70 * MINUTE);
        await h.service.monitor();
        assert.equal(await h.state(id), 'EXPIRED');
      });

      test('an extend accepted while a monitoring pass runs is not lost to it', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: hours(1) }));
        await h.clock.advanceTo(T0 + HOUR - 1);
        // The pass reads its batch now, with the old deadline; the extend lands before it decides.
        const pass = h.service.monitor();
        const extended = h.service.extend(alice, [{ jobId: id, requestedTime: minutes(10) }]).then(
          () => true,
          (e: unknown) => {
            if ((e as { status?: number }).status !== 409) throw e;
            return false;
          },
        );
        await h.clock.advanceTo(T0 + HOUR);
        await pass;
        // The extend and the expiry race: whichever the store orders first wins, and the other
        // sees it. On SQLite the extend's transaction comes first; PostgreSQL may order either.
        if (await extended) {
          assert.equal(await h.state(id), 'RUNNING');
          assert.equal((await h.job(id)).status.expiresAt, T0 + 70 * MINUTE);
        } else {
          assert.equal(kind, 'postgres', 'on SQLite the extend comes first');
          assert.equal(await h.state(id), 'EXPIRED');
          assert.equal((await h.job(id)).updates.filter((u) => u.newTimeAllocation !== undefined).length, 0);
        }
      });

      test('once the deadline has passed an extend is refused, also while the expiry cancels the job', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: hours(1) }));
        await h.clock.advanceTo(T0 + HOUR);
        const release = h.backend.hold('cancel');
        const pass = h.service.monitor();
        await until(async () => h.backend.calls('cancel', id) === 1, { describe: 'expiry cancels the job' });
        await rejectsWith(h.service.extend(alice, [{ jobId: id, requestedTime: hours(1) }]), 409);
        release();
        await pass;
        assert.equal(await h.state(id), 'EXPIRED');
        assert.equal((await h.job(id)).updates.filter((u) => u.newTimeAllocation !== undefined).length, 0);
        await rejectsWith(h.service.extend(alice, [{ jobId: id, requestedTime: hours(1) }]), 409);
      });

      test('extend checks its input', async () => {
        const h = await harness();
        const id = await h.running(mpi({ timeAllocation: hours(1) }));
        await rejectsWith(
          h.service.extend(alice, [{ jobId: id, requestedTime: minutes(0) }]),
          400,
          /requestedTime/,
        );
        await rejectsWith(h.service.extend(bob, [{ jobId: id, requestedTime: minutes(5) }]), 404);
        assert.equal((await h.job(id)).status.expiresAt, T0 + HOUR);
      });
    });

    describe('recovery', () => {
      const dir = mkdtempSync(join(tmpdir(), 'ucompute-service-test-'));
      after(() => rmSync(dir, { recursive: true, force: true }));

      test('a restart fails lost jobs, submits never-submitted ones once, and leaves ended ones alone', async () => {
        const location = await testStoreLocation(kind, dir);

        // Before the "crash": one job runs, one ended, one is stuck in submission, one only stored.
        const a = await harness({ store: await openStore(location) });
        const lost = await a.running();
        const ended = await a.running();
        await a.service.terminate(alice, [ended]);
        a.backend.hold('submit'); // never released: ucompute dies while the backend takes the job
        const [stuck] = await a.service.create(alice, [mpi()]);
        await until(async () => a.backend.calls('submit', stuck!) === 1, { describe: 'submit called' });
        await until(async () => (await a.store.jobs.get(stuck!))!.annotations !== null, {
          describe: 'build saved',
        });
        await a.store.jobs.insert([
          {
            id: 'storedonly1',
            createdBy: 'alice',
            project: null,
            application: 'mpi-hello',
            createdAt: T0,
            specification: mpi(),
            timeAllocationMs: 2 * HOUR,
            pricePerUnit: 1,
            firstUpdate: { timestamp: T0, state: 'IN_QUEUE', status: 'The job is in the queue' },
          },
        ]);
        await a.store.close();

        // After it: the same store file, a backend that knows none of these jobs.
        const survivingBackend = dryBackend({ runForMs: null });
        const b = await harness({ store: await openStore(location), backend: survivingBackend });
        await b.service.start();
        assert.equal(await b.state(lost), 'FAILURE');
        assert.equal(await b.lastStatus(lost), 'ucompute lost track of this job');
        assert.equal(await b.state(ended), 'SUCCESS');
        assert.equal(await b.lastStatus(ended), 'The job was cancelled');
        await until(
          async () => (await b.state(stuck!)) === 'RUNNING' && (await b.state('storedonly1')) === 'RUNNING',
          { describe: 'resubmitted jobs run' },
        );
        assert.equal(
          (await b.job('storedonly1')).output.outputFolder,
          '/home/alice/Jobs/MPI hello/storedonly1',
        );
        for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
        assert.equal(b.backend.calls('submit', stuck!), 1);
        assert.equal(b.backend.calls('submit', 'storedonly1'), 1);
        assert.equal(b.backend.calls('submit', lost), 0);
        assert.equal(b.backend.calls('submit', ended), 0);
        await b.service.stop();
        await b.store.close();

        // Another restart, and the backend still runs both: they are found again, nothing is resubmitted.
        const c = await harness({ store: await openStore(location), backend: survivingBackend });
        await c.service.start();
        for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
        assert.equal(await c.state(stuck!), 'RUNNING');
        assert.equal(await c.state('storedonly1'), 'RUNNING');
        assert.deepEqual(c.backend.log, []);
        await c.service.terminate(alice, [stuck!]);
        assert.equal(await c.state(stuck!), 'SUCCESS');
        await c.service.stop();
        await c.store.close();
      });
    });
  });
}
