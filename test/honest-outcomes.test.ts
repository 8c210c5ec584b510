import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { FastifyError, InjectOptions } from 'fastify';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { createJobService } from '../src/jobs/service.ts';
import { type Clock, systemClock } from '../src/model/clock.ts';
import type { PipelineConfig } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import { buildServer } from '../src/server/app.ts';
import { errorResponse } from '../src/server/errors.ts';
import { openSqliteStore, type SqliteStore } from '../src/store/sqlite/store.ts';
import { env, prepare } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { jobCount, userWithCredits } from './support/store.ts';
import { until } from './support/until.ts';

/**
 * Outcomes at the API that say what happened: a full disk is 507 and changes nothing, values no
 * program can receive are 400 naming the parameter, and time is bounded by the product's or the
 * operator's maximum.
 */

const mpi = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  ...extra,
});
const hours = (h: number) => ({ hours: h, minutes: 0, seconds: 0 });

const closers: (() => Promise<void>)[] = [];

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('outcomes told as they are', () => {
  after(async () => {
    for (const close of closers) await close();
  });

  async function world(
    config?: PipelineConfig,
    runForMs: number | null = null,
    environment = env(config),
    clock: Clock = systemClock,
  ) {
    // SQLite's own: a full disk is made by capping its pages.
    const store = openSqliteStore(':memory:');
    const token = await userWithCredits(store, 'alice');
    const backend = dryBackend({ runForMs, clock });
    const service = createJobService({ store, env: environment, backend, clock });
    const app = await buildServer({ service, store, env: environment, backend });
    closers.push(async () => {
      await app.close();
      await service.stop();
      await backend.close();
      await store.close();
    });
    const call = (url: string, body?: unknown) => {
      const options: InjectOptions = {
        method: body === undefined ? 'GET' : 'POST',
        url,
        headers: { authorization: `Bearer ${token}` },
      };
      if (body !== undefined) options.payload = body as InjectOptions['payload'];
      return app.inject(options);
    };
    const jobs = () => jobCount(store);
    return { store, service, call, jobs };
  }

  /** Lets SQLite grow no further than it is now (SQLITE_FULL, as on a full disk); returns the undo. */
  function fillDisk(store: SqliteStore): () => void {
    const pages = Object.values(store.database.prepare('pragma page_count').get()!)[0] as number;
    store.database.exec(`pragma max_page_count = ${pages}`);
    return () => store.database.exec('pragma max_page_count = 1073741823');
  }

  test('a full disk at submit answers 507 with a message and stores nothing', async () => {
    const w = await world();
    const free = fillDisk(w.store);
    // Enough jobs in one request that their rows need pages the database may not add.
    const items = Array.from({ length: 200 }, () => mpi({ name: 'x'.repeat(200) }));
    const response = await w.call('/api/jobs', { items });
    assert.equal(response.statusCode, 507, response.body);
    assert.match(response.json<{ message: string }>().message, /disk is full.*nothing was changed/);
    assert.equal(await w.jobs(), 0);
    free();
    const again = await w.call('/api/jobs', { items });
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(await w.jobs(), 200);
  });

  test('a job whose end cannot be written (disk full) is not left RUNNING once space is back', async () => {
    const clock = manualClock(Date.now());
    const w = await world(undefined, 50, undefined, clock);
    const created = await w.call('/api/jobs', { items: [mpi()] });
    assert.equal(created.statusCode, 200, created.body);
    const id = created.json<{ responses: { id: string }[] }>().responses[0]!.id;
    await until(async () => (await w.store.jobs.get(id))?.state === 'RUNNING', { describe: 'it runs' });
    // Every write fails from now on, as SQLite's do on a full disk.
    const transaction = w.store.transaction;
    w.store.transaction = async () => {
      throw Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
    };
    // Its SUCCESS arrives after 50 ms, while nothing can be written, and is kept: the write is tried
    // again a second later.
    await clock.advance(50);
    await until(() => clock.pending() === 1, { describe: 'the end waits to be written again' });
    assert.equal((await w.store.jobs.get(id))?.state, 'RUNNING');
    w.store.transaction = transaction;
    await clock.advance(1000);
    await until(async () => (await w.store.jobs.get(id))?.state === 'SUCCESS', {
      describe: 'the end is written',
    });
  });

  test('a job whose submission cannot be written (disk full) is submitted once space is back', async () => {
    const w = await world();
    const transaction = w.store.transaction;
    let refused = 0;
    // Accepting the job works; every write after it fails, as on a disk that just filled up.
    w.service.onCreated(() => {
      w.store.transaction = async () => {
        refused++;
        throw Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
      };
    });
    const created = await w.call('/api/jobs', { items: [mpi()] });
    assert.equal(created.statusCode, 200, created.body);
    const id = created.json<{ responses: { id: string }[] }>().responses[0]!.id;
    await until(() => refused > 0, { describe: 'the submission was refused' });
    w.store.transaction = transaction;
    await until(async () => (await w.store.jobs.get(id))?.state === 'RUNNING', {
      describe: 'it is submitted and runs',
    });
  });

  test('parameter values the kernel cannot pass are 400 at submit, naming the parameter', async () => {
    const w = await world();
    const refused = async (value: string, message: RegExp) => {
      const response = await w.call('/api/jobs', {
        items: [mpi({ parameters: { command: { type: 'text', value } } })],
      });
      assert.equal(response.statusCode, 400, response.body);
      const { issues } = response.json<{ issues: { path: string; message: string }[] }>();
      assert.equal(issues[0]?.path, 'items[0].specification.parameters.command');
      assert.match(issues[0]!.message, message);
    };
    await refused('echo a\u0000b', /NUL byte/);
    // 65,536 characters pass the schema; as UTF-8 they are 131,072 bytes, one more than an argument holds.
    await refused('é'.repeat(65_536), /131072 bytes; one program argument holds at most 131071/);
    assert.equal(await w.jobs(), 0);
    const fits = await w.call('/api/jobs', {
      items: [mpi({ parameters: { command: { type: 'text', value: 'é'.repeat(65_535) } } })],
    });
    assert.equal(fits.statusCode, 200, fits.body);
  });

  test('file names too long or not valid Unicode are 400 at submit, naming the parameter', async () => {
    const w = await world();
    const refused = async (path: string, message: RegExp) => {
      const response = await w.call('/api/jobs', {
        items: [
          {
            application: { name: 'word-count', version: '1.0' },
            product: { id: 'u1-standard-1', category: 'u1-standard' },
            parameters: { input: { type: 'file', path } },
          },
        ],
      });
      assert.equal(response.statusCode, 400, response.body);
      const { issues } = response.json<{ issues: { path: string; message: string }[] }>();
      assert.equal(issues[0]?.path, 'items[0].specification.parameters.input.path');
      assert.match(issues[0]!.message, message);
    };
    await refused(`/home/alice/${'n'.repeat(300)}`, /is 300 bytes long; a file name holds at most 255/);
    await refused('/home/alice/half\ud800', /not valid Unicode/);
    assert.equal(await w.jobs(), 0);
  });

  test('time is bounded by the maximum: at submit and when extending, 400 naming the field', async () => {
    const w = await world({ maxTimeAllocationHours: 3 });
    const tooLong = await w.call('/api/jobs', { items: [mpi({ timeAllocation: hours(4) })] });
    assert.equal(tooLong.statusCode, 400, tooLong.body);
    assert.match(tooLong.body, /items\[0\]\.specification\.timeAllocation.*at most 3 hours/);
    const unlimited = await w.call('/api/jobs', { items: [mpi({ timeAllocation: null })] });
    assert.equal(unlimited.statusCode, 400, unlimited.body);
    assert.equal(await w.jobs(), 0);

    const created = await w.call('/api/jobs', { items: [mpi({ timeAllocation: hours(2) })] });
    assert.equal(created.statusCode, 200, created.body);
    const jobId = created.json<{ responses: { id: string }[] }>().responses[0]!.id;
    const beyond = await w.call('/api/jobs/extend', { items: [{ jobId, requestedTime: hours(2) }] });
    assert.equal(beyond.statusCode, 400, beyond.body);
    assert.match(beyond.json<{ message: string }>().message, /^items\[0\]\.requestedTime: .* at most 3/);
    assert.equal((await w.store.jobs.get(jobId))?.timeAllocationMs, 2 * 3_600_000);
    const within = await w.call('/api/jobs/extend', { items: [{ jobId, requestedTime: hours(1) }] });
    assert.equal(within.statusCode, 200, within.body);
    assert.equal((await w.store.jobs.get(jobId))?.timeAllocationMs, 3 * 3_600_000);
  });

  test('by default a job may have a week, extensions included: a million hours or no limit is 400', async () => {
    const w = await world({ maxTimeAllocationHours: undefined });
    for (const timeAllocation of [hours(1_000_000), null]) {
      const refused = await w.call('/api/jobs', { items: [mpi({ timeAllocation })] });
      assert.equal(refused.statusCode, 400, refused.body);
      assert.match(refused.body, /items\[0\]\.specification\.timeAllocation.*at most 168 hours/);
    }
    const created = await w.call('/api/jobs', { items: [mpi({ timeAllocation: hours(100) })] });
    assert.equal(created.statusCode, 200, created.body);
    const jobId = created.json<{ responses: { id: string }[] }>().responses[0]!.id;
    const beyond = await w.call('/api/jobs/extend', { items: [{ jobId, requestedTime: hours(1_000_000) }] });
    assert.equal(beyond.statusCode, 400, beyond.body);
    assert.match(beyond.json<{ message: string }>().message, /at most 168/);
    const within = await w.call('/api/jobs/extend', { items: [{ jobId, requestedTime: hours(68) }] });
    assert.equal(within.statusCode, 200, within.body);
  });

  test("a job that asks for no time gets its tool's default within the maximum", async () => {
    const w = await world({ maxTimeAllocationHours: 0.5 });
    const created = await w.call('/api/jobs', { items: [mpi()] });
    assert.equal(created.statusCode, 200, created.body);
    const jobId = created.json<{ responses: { id: string }[] }>().responses[0]!.id;
    assert.equal((await w.store.jobs.get(jobId))?.timeAllocationMs, 1_800_000);
  });

  test("a product's own maximum is shorter than the operator's: the shorter one holds", async () => {
    const base = env({ maxTimeAllocationHours: 10 });
    const products = base.products.map((p) =>
      p.id === 'u1-standard-2' ? { ...p, maxTimeAllocationHours: 1.5 } : p,
    );
    const w = await world(undefined, null, { ...base, products });
    const response = await w.call('/api/jobs', { items: [mpi({ timeAllocation: hours(2) })] });
    assert.equal(response.statusCode, 400, response.body);
    assert.match(response.body, /at most 1.5 hours, the maximum for u1-standard-2/);
  });

  test('an ENOSPC from the file system is a 507 too', () => {
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const { status, body } = errorResponse(full as unknown as FastifyError);
    assert.equal(status, 507);
    assert.match(body.message, /disk is full/);
  });

  test('values that fit one by one but not together are 400 naming the parameters', () => {
    const names = Array.from({ length: 9 }, (_, i) => `p${i}`);
    const text = `tool: v1
name: t
version: "1"
title: T
authors: [me]
description: d
container: debian:12
backend: DOCKER
---
application: v1
name: many
version: "1"
title: Many
authors: [me]
description: d
tool: { name: t, version: "1" }
invocation:
  - echo
${names.map((n) => `  - type: var\n    vars: ${n}`).join('\n')}
parameters:
${names.map((n) => `  ${n}: { type: text, title: ${n}, optional: true }`).join('\n')}
`;
    const { catalog, issues } = buildCatalog([{ path: 'many.yml', text }]);
    assert.deepEqual(issues, []);
    // 120,000 bytes each: under one argument's limit, 1,080,000 together.
    const parameters = Object.fromEntries(names.map((n) => [n, { type: 'text', value: 'é'.repeat(60_000) }]));
    const spec = {
      application: { name: 'many', version: '1' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      parameters,
    };
    assert.throws(
      () => prepare(spec, { catalog }),
      (e: unknown) =>
        e instanceof ValidationError &&
        e.issues.length === 1 &&
        e.issues[0]!.path === 'specification.parameters' &&
        /1080000 bytes together/.test(e.issues[0]!.message),
    );
    const fewer = { ...spec, parameters: Object.fromEntries(Object.entries(parameters).slice(0, 8)) };
    assert.equal(prepare(fewer, { catalog }).parameters.values.p0?.type, 'text');
  });
});
