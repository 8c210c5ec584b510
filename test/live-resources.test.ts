import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { expiryWarning, expiryWarnings, warningDue } from '../src/jobs/expiry-warnings.ts';
import { resourceSampler, resourceSeriesCleanup } from '../src/jobs/resource-sampler.ts';
import { MAX_SAMPLES } from '../src/store/resource-series.ts';
import type { Store } from '../src/store/store.ts';
import { CHILD_ENV, runCliHere } from './support/cli.ts';
import { call, world } from './support/interactive.ts';
import { jobInState } from './support/server.ts';
import { openTestStore } from './support/store.ts';

/**
 * The live resource views' series (sampled from the backend, kept for the job's life at a grain
 * that coarsens as it grows, removed at cleanup, served per job) and the warning before a job's
 * time runs out (once per deadline, in its updates and to a webhook).
 */

const T0 = Date.UTC(2026, 10, 1);

/** A stored RUNNING job of alice's, started at T0 and ending at `expiresAt`. */
async function runningJob(store: Store, id: string, expiresAt: number | null): Promise<void> {
  await store.jobs.insert([
    {
      id,
      createdBy: 'alice',
      project: null,
      application: 'jupyter',
      createdAt: T0,
      specification: {
        application: { name: 'jupyter', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
      },
      timeAllocationMs: null,
      pricePerUnit: 1,
      firstUpdate: { timestamp: T0, state: 'IN_QUEUE' },
    },
  ]);
  const job = (await store.jobs.get(id))!;
  await store.jobs.appendUpdate(
    job,
    { timestamp: T0, state: 'RUNNING' },
    { state: 'RUNNING', startedAt: T0, expiresAt },
  );
}

test("a rank's series keeps the job's whole life within its bound, the past at a coarser grain", async () => {
  const store = await openTestStore();
  const series = store.resourceSeries;
  for (let i = 0; i < 3 * MAX_SAMPLES; i++) {
    await series.append(T0 + i * 1000, new Map([['j1', [{ rank: 0, cpuCores: i, memoryBytes: 1000 + i }]]]));
  }
  const [rank0] = await series.of('j1');
  const samples = rank0!.samples;
  assert.ok(samples.length <= MAX_SAMPLES, `${samples.length} samples`);
  assert.equal(samples[0]!.at, T0, 'the first sample stays');
  assert.equal(samples.at(-1)!.at, T0 + (3 * MAX_SAMPLES - 1) * 1000, 'the newest is there');
  const gaps = samples.slice(1).map((s, i) => s.at - samples[i]!.at);
  assert.ok(gaps.at(-1)! < gaps[0]!, 'recent samples are closer together than old ones');
  assert.deepEqual(samples.at(-1), {
    at: T0 + (3 * MAX_SAMPLES - 1) * 1000,
    cpuCores: 3 * MAX_SAMPLES - 1,
    memoryBytes: 1000 + 3 * MAX_SAMPLES - 1,
  });
  assert.deepEqual(
    (await series.of('j1', samples.at(-2)!.at)).map((r) => r.samples.length),
    [1],
    'after: only newer',
  );
});

test('the sampler asks the backend for every running job at once; cleanup forgets the series', async () => {
  const store = await openTestStore();
  await runningJob(store, 'j1', null);
  await runningJob(store, 'j2', null);
  // Every running job each period: their ids only, not their rows.
  store.jobs.runningRows = () => Promise.reject(new Error('the sampler reads running rows'));
  const asked: string[][] = [];
  let at = T0;
  const sampler = resourceSampler({
    store,
    now: () => at,
    backend: {
      usage: async (ids) => {
        asked.push([...ids]);
        return new Map([
          [
            'j1',
            [
              { rank: 0, cpuCores: 0.5 },
              { rank: 1, cpuCores: 1.5, memoryBytes: 4096 },
            ],
          ],
        ]);
      },
    },
  });
  await sampler.sample();
  at += 5000;
  await sampler.sample();
  assert.deepEqual(asked, [
    ['j1', 'j2'],
    ['j1', 'j2'],
  ]);
  const series = store.resourceSeries;
  assert.deepEqual(await series.of('j1'), [
    {
      rank: 0,
      samples: [
        { at: T0, cpuCores: 0.5 },
        { at: T0 + 5000, cpuCores: 0.5 },
      ],
    },
    {
      rank: 1,
      samples: [
        { at: T0, cpuCores: 1.5, memoryBytes: 4096 },
        { at: T0 + 5000, cpuCores: 1.5, memoryBytes: 4096 },
      ],
    },
  ]);
  await resourceSeriesCleanup(store).onCleanup?.({} as never, 'j1');
  assert.deepEqual(await series.of('j1'), []);
});

test('a deadline is warned of once, in the updates and to the webhook; an extension is warned of again', async () => {
  assert.equal(warningDue(T0 + 20 * 60_000, T0, 15 * 60_000), false);
  assert.equal(warningDue(T0 + 10 * 60_000, T0, 15 * 60_000), true);
  assert.equal(warningDue(T0 - 1, T0, 15 * 60_000), false, 'past: it expires instead');
  assert.equal(warningDue(null, T0, 15 * 60_000), false);

  const received: unknown[] = [];
  const hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.end();
    });
  }).listen(0, '127.0.0.1');
  await once(hook, 'listening');
  try {
    const store = await openTestStore();
    await runningJob(store, 'j1', T0 + 10 * 60_000);
    await runningJob(store, 'j2', T0 + 60 * 60_000);
    const statuses: [string, string][] = [];
    let now = T0;
    const addStatus = async (id: string, status: string) => {
      statuses.push([id, status]);
      const job = (await store.jobs.get(id))!;
      await store.jobs.appendUpdate(job, { timestamp: now, status }, {});
    };
    // Only the jobs whose deadline has come close are read, not every running row.
    const read: string[] = [];
    const { expiringRows } = store.jobs;
    store.jobs.expiringRows = async (by, after, limit) => {
      const rows = await expiringRows(by, after, limit);
      read.push(...rows.map((r) => r.id));
      return rows;
    };
    store.jobs.runningRows = () => Promise.reject(new Error('the warnings read every running row'));
    const webhook = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
    const warnings = expiryWarnings({ store, addStatus, now: () => now, webhook });
    await warnings.check();
    await warnings.check();
    assert.deepEqual(statuses, [['j1', expiryWarning(T0 + 10 * 60_000)]]);
    assert.deepEqual([...new Set(read)], ['j1']);
    assert.match(
      statuses[0]![1],
      /^The job's time runs out at 2026-11-01 00:10 UTC: extend it to keep it running$/,
    );
    assert.deepEqual(received, [
      {
        type: 'job.expiring',
        job: { id: 'j1', owner: { createdBy: 'alice' }, application: 'jupyter' },
        expiresAt: T0 + 10 * 60_000,
        minutesLeft: 10,
      },
    ]);
    // A restarted service finds the warning said; an extension moves the deadline, warned of again.
    await expiryWarnings({ store, addStatus, now: () => now }).check();
    assert.equal(statuses.length, 1);
    await store.jobs.appendUpdate(
      (await store.jobs.get('j1'))!,
      { timestamp: now },
      { expiresAt: T0 + 20 * 60_000 },
    );
    now = T0 + 6 * 60_000;
    await warnings.check();
    assert.deepEqual(
      statuses.map(([id]) => id),
      ['j1', 'j1'],
    );
  } finally {
    hook.close();
  }
});

test('the series through the API (with the machine type as limits and the configured period; others\u2019 jobs not found) and ucompute top; show warns of a close deadline', async () => {
  // Not the default 5000 ms: the period the pages and `ucompute top` poll by is the configured one.
  const w = await world({ resourceSampleMs: 1500 });
  try {
    const created = await call(w.port, {
      host: `localhost:${w.port}`,
      path: '/api/jobs',
      method: 'POST',
      headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        items: [
          {
            application: { name: 'terminal', version: '1.0' },
            product: { id: 'u1-standard-2', category: 'u1-standard' },
            timeAllocation: { hours: 0, minutes: 10, seconds: 0 },
          },
        ],
      }),
    });
    const id = JSON.parse(created.body).responses[0].id as string;
    await jobInState(w, id, 'RUNNING');
    await w.store.resourceSeries.append(
      T0,
      new Map([[id, [{ rank: 0, cpuCores: 1.25, memoryBytes: 2 ** 20 }]]]),
    );
    const get = (who: 'alice' | 'bob', query = '') =>
      call(w.port, {
        host: `localhost:${w.port}`,
        path: `/api/jobs/resources?id=${id}${query}`,
        headers: { authorization: `Bearer ${w.tokens[who]}` },
      });
    const answer = await get('alice');
    assert.equal(answer.status, 200, answer.body);
    assert.deepEqual(JSON.parse(answer.body), {
      jobId: id,
      periodMs: 1500,
      limits: { cpuCores: 2, memoryBytes: 4 * 2 ** 30, gpus: 0 },
      ranks: [{ rank: 0, samples: [{ at: T0, cpuCores: 1.25, memoryBytes: 2 ** 20 }] }],
    });
    assert.deepEqual(JSON.parse((await get('alice', `&after=${T0}`)).body).ranks, []);
    assert.equal((await get('bob')).status, 404);

    // ucompute top reads the same series; show warns of a deadline that has come close.
    const cli = (...args: string[]) =>
      runCliHere([...args, '--url', `http://127.0.0.1:${w.port}`], {
        env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
      });
    const top = await cli('top', id, '--once');
    assert.equal(top.code, 0, top.stderr);
    assert.match(top.stdout, /^job \S+: each rank may use 2 cores and 4\.0 GiB\n/);
    assert.match(top.stdout, /^RANK\s+CPU \(CORES\)\s+MEMORY\s+GPU\s+CPU, LAST SAMPLES$/m);
    assert.match(top.stdout, /^0\s+1\.25 \(63%\)\s+1\.0 MiB \(0%\)\s+-\s+▆$/m);
    const show = await cli('show', id);
    assert.equal(show.code, 0, show.stderr + show.stdout);
    assert.match(
      `${show.stderr}${show.stdout}`,
      new RegExp(
        `^warning: the job's time runs out in \\d+m\\d\\ds: \`ucompute extend ${id} 1h\` gives it an hour more$`,
        'm',
      ),
    );
  } finally {
    await w.close();
  }
});
