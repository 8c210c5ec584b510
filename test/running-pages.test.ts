import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { runningPages } from '../src/jobs/running-pages.ts';
import { createJobService } from '../src/jobs/service.ts';
import { env } from './support/fixtures.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';
import { until } from './support/until.ts';

// A pass over the running jobs (monitoring, sampling, expiry warnings, utilization) reads them a
// page at a time by id, so that 10,000 of them are never all in memory with their builds; the
// periodic ones (monitoring, sampling, expiry warnings) read their rows without JSON.

const alice = { username: 'alice', admin: false };
const mpi = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

/** A job service on a fresh store of `kind` with `count` of alice's jobs RUNNING on a dry backend. */
async function runningJobs(
  t: TestContext,
  kind: (typeof STORE_KINDS)[number],
  count: number,
  options: { monitorIntervalMs?: number } = {},
) {
  const store = await openTestStore(kind);
  const service = createJobService({
    store,
    env: env(),
    backend: dryBackend({ runForMs: null }),
    requireCredits: false,
    ...options,
  });
  t.after(async () => {
    await service.stop();
    await store.close();
  });
  const ids = await service.create(
    alice,
    Array.from({ length: count }, () => mpi),
  );
  const state = async (id: string) => (await service.retrieve(alice, id)).status.state;
  await until(async () => (await Promise.all(ids.map(state))).every((s) => s === 'RUNNING'), {
    describe: `all ${count} running`,
  });
  return { store, service, ids, state };
}

for (const kind of STORE_KINDS) {
  describe(`on ${kind}`, () => {
    test('running jobs come a page at a time, each once, by id, an ended one not at all', async (t) => {
      const { store, service, ids, state } = await runningJobs(t, kind, 7);
      const [ended] = ids;
      await service.terminate(alice, [ended!]);
      await until(async () => (await state(ended!)) !== 'RUNNING', { describe: 'the first one ended' });

      const asked: { after: string | undefined; got: number }[] = [];
      const read = async (after: string | undefined, limit: number) => {
        const page = await store.jobs.runningRows(after, limit);
        asked.push({ after, got: page.length });
        return page;
      };
      const pages: string[][] = [];
      for await (const page of runningPages(read, 2)) pages.push(page.map((j) => j.id));

      const running = ids.slice(1).sort();
      assert.deepEqual(pages.flat(), running);
      assert.deepEqual(
        pages.map((p) => p.length),
        [2, 2, 2],
      );
      // Each page starts after the last id of the one before; the last, short or empty, ends the pass.
      assert.deepEqual(asked, [
        { after: undefined, got: 2 },
        { after: running[1], got: 2 },
        { after: running[3], got: 2 },
        { after: running[5], got: 0 },
      ]);
      assert.deepEqual(
        (await store.jobs.running(running[4], 10)).map((j) => j.id),
        [running[5]],
      );
      // The rows the periodic passes read are the whole records but their JSON and output folder.
      const [whole] = await store.jobs.running(running[4], 1);
      const [row] = await store.jobs.runningRows(running[4], 1);
      const { specification, annotations, exitCodes, outputFolder, ...rest } = whole!;
      assert.ok(specification && annotations);
      assert.deepEqual(row, rest);
      // Their ids alone (the resource sampler), and the active jobs without JSON (the quota watch).
      assert.deepEqual(await store.jobs.runningIds(running[4], 10), [running[5]]);
      // Those whose deadline is at or before a time (the expiry warnings): all, later than any; none, at 0.
      const expiring = async (by: number) =>
        (await store.jobs.expiringRows(by, undefined, 10)).map((j) => j.id);
      assert.deepEqual(await expiring(Number.MAX_SAFE_INTEGER), running);
      assert.deepEqual(await expiring(0), []);
      assert.deepEqual(
        await store.jobs.activeRows(),
        (await store.jobs.active()).map(
          ({ specification, annotations, exitCodes, outputFolder, ...narrow }) => narrow,
        ),
      );
    });

    test('monitoring reads each running job’s annotations once, then only its row without JSON', async (t) => {
      // Only the passes this test asks for.
      const { store, service } = await runningJobs(t, kind, 5, { monitorIntervalMs: 3_600_000 });
      const read = { builds: 0, wholeRows: 0 };
      const { get, running } = store.jobs;
      store.jobs.get = (id) => {
        read.builds++;
        return get(id);
      };
      store.jobs.running = (after, limit) => {
        read.wholeRows++;
        return running(after, limit);
      };
      await service.monitor();
      assert.equal(read.builds, 5);
      await service.monitor();
      await service.monitor();
      assert.deepEqual(read, { builds: 5, wholeRows: 0 });
    });

    test('between listings a pass reads only the jobs that changed, not every running row', async (t) => {
      const { store, service, state } = await runningJobs(t, kind, 3, { monitorIntervalMs: 3_600_000 });
      const read = { pages: 0, of: [] as string[] };
      const { runningRows, runningRowsOf } = store.jobs;
      store.jobs.runningRows = (after, limit) => {
        read.pages++;
        return runningRows(after, limit);
      };
      store.jobs.runningRowsOf = (ids) => {
        read.of.push(...ids);
        return runningRowsOf(ids);
      };
      await service.monitor();
      assert.ok(read.pages > 0, 'the first pass lists the running jobs');
      read.pages = 0;
      // Nothing changed, nothing due (a charge a minute): nothing read.
      await service.monitor();
      await service.monitor();
      assert.deepEqual(read, { pages: 0, of: [] });
      // A job that starts running is read from its events; the others are not read again.
      const [late] = await service.create(alice, [mpi]);
      await until(async () => (await state(late!)) === 'RUNNING', { describe: 'the new job running' });
      await service.monitor();
      assert.equal(read.pages, 0);
      assert.deepEqual([...new Set(read.of)], [late]);
    });
  });
}
