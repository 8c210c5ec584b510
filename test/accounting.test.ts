import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend, BackendEvent, BackendEventListener } from '../src/jobs/backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import type { PipelineConfig } from '../src/model/config.ts';
import { type Product, periodMillis } from '../src/model/product.ts';
import { accountingPlugin, NO_CREDITS_STATUS } from '../src/plugins/accounting.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import type { ActiveJob, Charge, JobPlugin, LifecycleContext } from '../src/plugins/plugin.ts';
import { env, products } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { PER_MINUTE } from './support/products.ts';
import { rejectsWith } from './support/service.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

const T0 = Date.UTC(2025, 0, 1);
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const alice = { username: 'alice', admin: false };
const bob = { username: 'bob', admin: false };

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const STANDARD_2 = { id: 'u1-standard-2', category: 'u1-standard' };
const GPU_1 = { id: 'u1-gpu-1', category: 'u1-gpu' };
const FREE: Product = { id: 'u1-free', category: 'u1-free', cpu: 1, memoryInGigs: 1, pricePerUnit: 0 };
/** One vCPU at 1 credit per minute, hour or day. */
const PER: Record<'MINUTE' | 'HOUR' | 'DAY', Product> = {
  MINUTE: PER_MINUTE,
  HOUR: {
    id: 'per-hour',
    category: 'per-hour',
    cpu: 1,
    memoryInGigs: 1,
    pricePerUnit: 1,
    unitOfPrice: 'CREDITS_PER_HOUR',
  },
  DAY: {
    id: 'per-day',
    category: 'per-day',
    cpu: 1,
    memoryInGigs: 1,
    pricePerUnit: 1,
    unitOfPrice: 'CREDITS_PER_DAY',
  },
};

/** mpi-hello takes no parameters and runs on several replicas; no time limit unless asked. */
const mpi = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: STANDARD_2,
  timeAllocation: null,
  ...extra,
});

interface HarnessOptions {
  backend?: Backend;
  plugins?: readonly JobPlugin[];
  /** When the clock starts; T0 by default. */
  start?: number;
  config?: PipelineConfig;
}

async function harness(o: HarnessOptions = {}) {
  const clock = manualClock(o.start ?? T0);
  const store = await openTestStore();
  const inner = o.backend ?? dryBackend({ runForMs: null, clock });
  const told: BackendEventListener[] = [];
  const backend: Backend = {
    ...inner,
    onEvent(listener) {
      told.push(listener);
      inner.onEvent(listener);
    },
  };
  /** The backend reports `event` (answers once the service has written it). */
  const report = async (event: BackendEvent) => {
    await Promise.all(told.map((listener) => listener(event)));
  };
  const service = createJobService({
    store,
    env: { ...env(o.config), products: [...products, FREE, ...Object.values(PER)] },
    backend,
    clock,
    requireCredits: true,
    ...(o.plugins ? { plugins: o.plugins } : {}),
  });
  /** Credits for a month around T0. */
  const grant = async (
    owner: string,
    category: string,
    credits: number,
    startAt = T0 - DAY,
    endAt = T0 + 30 * DAY,
  ) => await store.accounting.grant(owner, category, credits, startAt, endAt, T0);
  const job = async (id: string) => await service.retrieve({ username: 'admin', admin: true }, id);
  const state = async (id: string) => (await job(id)).status.state;
  const charges = async (owner: string) => await store.accounting.charges(owner, 0, Number.MAX_SAFE_INTEGER);
  const running = async (spec: unknown, caller = alice, project?: string): Promise<string> => {
    const [id] = await service.create(caller, [spec], project !== undefined ? { project } : {});
    await until(async () => (await state(id!)) === 'RUNNING', { describe: `${id} runs` });
    return id!;
  };
  /** Moves the clock to `at` after T0 and runs one monitoring pass. */
  const monitorAt = async (at: number) => {
    await clock.advanceTo(T0 + at);
    await service.monitor();
  };
  return { clock, store, backend, service, grant, job, state, charges, running, monitorAt, report };
}

describe('charges', () => {
  test('units are replicas × vCPU; whole minutes while running, the started minute at the end', async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-standard', 1000);
    const id = await h.running(mpi({ replicas: 3 }));
    assert.deepEqual((await h.job(id)).billing, { creditsCharged: 0, pricePerUnit: 1 });

    await h.monitorAt(59 * SECOND);
    assert.deepEqual(await h.charges('user:alice'), []);

    await h.monitorAt(60 * SECOND);
    assert.deepEqual(await h.charges('user:alice'), [
      {
        chargeId: `${id}:0-0`,
        jobId: id,
        owner: 'user:alice',
        category: 'u1-standard',
        units: 6,
        periods: 1,
        credits: 6,
        chargedAt: T0 + 60 * SECOND,
      },
    ]);
    assert.equal((await h.job(id)).billing.creditsCharged, 6);

    await h.monitorAt(150 * SECOND);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.periods, c.credits]),
      [
        [`${id}:0-0`, 1, 6],
        [`${id}:1-1`, 1, 6],
      ],
    );
    assert.equal((await h.job(id)).billing.creditsCharged, 12);

    // Ended at 2.5 minutes: the third, started minute is charged too.
    await h.service.terminate(alice, [id]);
    const all = await h.charges('user:alice');
    assert.deepEqual(
      (await all).map((c) => [c.chargeId, c.periods, c.credits]),
      [
        [`${id}:0-0`, 1, 6],
        [`${id}:1-1`, 1, 6],
        [`${id}:2-2`, 1, 6],
      ],
    );
    assert.equal((await h.job(id)).billing.creditsCharged, 18);
    assert.equal(
      (await all).reduce((sum, c) => sum + c.credits, 0),
      18,
    );
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'user:alice', category: 'u1-standard', allocated: 1000, used: 18, balance: 982 },
    ]);

    // Nothing more after the end.
    await h.monitorAt(10 * MINUTE);
    assert.equal((await h.charges('user:alice')).length, 3);
  });

  test('a GPU product priced per GPU-hour charges replicas × GPU per started hour', async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-gpu', 10_000);
    const id = await h.running(mpi({ product: GPU_1, replicas: 2 }));
    assert.equal((await h.job(id)).billing.pricePerUnit, 60);

    await h.monitorAt(59 * MINUTE);
    assert.deepEqual(await h.charges('user:alice'), []);
    await h.monitorAt(60 * MINUTE);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.category, c.units, c.periods, c.credits]),
      [[`${id}:0-0`, 'u1-gpu', 2, 1, 120]],
    );

    await h.clock.advanceTo(T0 + 61 * MINUTE);
    await h.service.terminate(alice, [id]);
    assert.equal((await h.job(id)).billing.creditsCharged, 240);
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'user:alice', category: 'u1-gpu', allocated: 10_000, used: 240, balance: 9760 },
    ]);
  });

  test('accounting.chargePeriodMs of a minute: the per-GPU-hour product pays per started GPU-minute', async () => {
    const h = await harness({ config: { accounting: { chargePeriodMs: MINUTE } } });
    await h.grant('user:alice', 'u1-gpu', 10_000);
    const id = await h.running(mpi({ product: GPU_1, replicas: 2 }));

    await h.monitorAt(59 * SECOND);
    assert.deepEqual(await h.charges('user:alice'), []);
    await h.monitorAt(MINUTE);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.units, c.periods, c.credits]),
      [[`${id}:0-0`, 2, 1, 2]],
    );
    await h.clock.advanceTo(T0 + 61 * MINUTE + 30 * SECOND);
    await h.service.terminate(alice, [id]);
    // 62 started minutes of 2 GPUs at 60 credits per GPU-hour, where per started hour it is 240.
    assert.equal((await h.job(id)).billing.creditsCharged, 124);
  });

  test('a job that expires is charged up to its end, once', async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-standard', 1000);
    const id = await h.running(mpi({ timeAllocation: { hours: 0, minutes: 2, seconds: 30 } }));
    await h.monitorAt(60 * SECOND);
    // Expiry and Accounting see the same batch: the job ends as EXPIRED in the middle of the pass.
    await h.monitorAt(150 * SECOND);
    assert.equal(await h.state(id), 'EXPIRED');
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.periods]),
      [
        [`${id}:0-0`, 1],
        [`${id}:1-2`, 2],
      ],
    );
    assert.equal((await h.job(id)).billing.creditsCharged, 3 * 2);
  });

  test('an ended job is charged up to the end its backend reports, not up to when that is learnt', async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-standard', 1000);
    const id = await h.running(mpi());
    await h.monitorAt(MINUTE);
    // It ended at 90 s; ucompute learns of it at 5 minutes (after a takeover, a slow watch).
    await h.clock.advanceTo(T0 + 5 * MINUTE);
    await h.report({ jobId: id, state: 'SUCCESS', status: 'The job finished', at: T0 + 90 * SECOND });
    assert.equal(await h.state(id), 'SUCCESS');
    await until(async () => (await h.charges('user:alice')).length === 2, { describe: 'the final charge' });
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.periods]),
      [
        [`${id}:0-0`, 1],
        [`${id}:1-1`, 1],
      ],
    );
    // A job whose end the backend dates (in whole seconds) before the start ucompute saw still ran.
    const brief = await h.running(mpi());
    await h.report({ jobId: brief, state: 'SUCCESS', status: 'The job finished', at: T0 + 4 * MINUTE });
    await until(async () => (await h.job(brief)).billing.creditsCharged === 2, { describe: 'one period' });
  });

  test('a project job charges the project, and its PI sees the wallet', async () => {
    const h = await harness();
    await h.store.users.createUser('alice', false, T0);
    await h.store.users.createProject('lab', 'The lab', T0);
    await h.store.users.setMember('lab', 'alice', 'PI');
    await h.grant('project:lab', 'u1-standard', 100);
    const id = await h.running(mpi({ product: STANDARD_1 }), alice, 'lab');
    await h.monitorAt(3 * MINUTE);
    assert.equal((await h.job(id)).billing.creditsCharged, 3);
    assert.deepEqual(await h.charges('user:alice'), []);
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'project:lab', category: 'u1-standard', allocated: 100, used: 3, balance: 97 },
    ]);
  });

  test('a job that never ran costs nothing', async () => {
    // A backend that never takes the job: it stays IN_QUEUE until cancelled.
    const backend: Backend = { ...dryBackend({ runForMs: null }), submit: () => new Promise<void>(() => {}) };
    const h = await harness({ backend });
    await h.grant('user:alice', 'u1-standard', 1000);
    const [id] = await h.service.create(alice, [mpi()]);
    await h.monitorAt(10 * MINUTE);
    assert.equal(await h.state(id!), 'IN_QUEUE');
    await h.service.terminate(alice, [id!]);
    assert.equal(await h.state(id!), 'SUCCESS');
    assert.equal((await h.job(id!)).billing.creditsCharged, 0);
    assert.deepEqual(await h.charges('user:alice'), []);
  });

  test('free products need no credits and are never stopped for them', async () => {
    const h = await harness();
    const id = await h.running(mpi({ product: { id: 'u1-free', category: 'u1-free' } }));
    await h.monitorAt(10 * MINUTE);
    assert.equal(await h.state(id), 'RUNNING');
    assert.equal((await h.job(id)).billing.creditsCharged, 0);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => c.credits),
      [0],
    );
  });
});

describe('suspension', () => {
  const WAIT = 3 * DAY;
  const periodsOf = async (h: Awaited<ReturnType<typeof harness>>, owner: string) =>
    (await h.charges(owner)).reduce((sum, c) => sum + c.periods, 0);

  for (const [unit, expected] of [
    ['MINUTE', 120],
    ['HOUR', 2],
    ['DAY', 1],
  ] as const) {
    test(`90 minutes, suspended ${WAIT / DAY} days, 30 minutes: the periods of 120 minutes (per ${unit})`, async () => {
      const h = await harness();
      const product = PER[unit];
      await h.grant('user:alice', product.category, 1_000_000);
      const id = await h.running(mpi({ product: { id: product.id, category: product.category } }));
      await h.monitorAt(90 * MINUTE);
      await h.service.suspend(alice, [id]);
      assert.equal(await h.state(id), 'SUSPENDED');
      // Up to the suspension, as at an end: the started period too.
      assert.equal(
        await periodsOf(h, 'user:alice'),
        Math.ceil((90 * MINUTE) / periodMillis(product.unitOfPrice)),
      );
      const atSuspension = (await h.charges('user:alice')).length;

      await h.monitorAt(WAIT / 2);
      assert.equal((await h.charges('user:alice')).length, atSuspension, 'nothing while suspended');
      await h.clock.advanceTo(T0 + WAIT);
      await h.service.unsuspend(alice, [id]);
      await until(async () => (await h.state(id)) === 'RUNNING', { describe: `${id} runs again` });
      await h.monitorAt(WAIT + 20 * MINUTE);
      await h.clock.advanceTo(T0 + WAIT + 30 * MINUTE);
      await h.service.terminate(alice, [id]);

      assert.equal(await periodsOf(h, 'user:alice'), expected);
      assert.equal((await h.job(id)).billing.creditsCharged, expected);
      const ids = (await h.charges('user:alice')).map((c) => c.chargeId);
      assert.equal(new Set(ids).size, ids.length, 'each charge names its own periods');
    });
  }

  test('a job cancelled while suspended, or queued again, pays nothing more', async () => {
    const h = await harness();
    await h.grant('user:alice', 'per-minute', 1_000_000);
    const spec = mpi({ product: { id: 'per-minute', category: 'per-minute' } });
    const suspended = await h.running(spec);
    const requeued = await h.running(spec);
    await h.clock.advanceTo(T0 + 10 * MINUTE);
    await h.service.suspend(alice, [suspended, requeued]);
    await h.service.unsuspend(alice, [requeued]);
    await h.clock.advanceTo(T0 + DAY);
    await h.service.terminate(alice, [suspended]);
    assert.equal((await h.job(suspended)).billing.creditsCharged, 10);
    // The requeued job's suspension was charged; a queued job has no run under way.
    assert.equal((await h.job(requeued)).billing.creditsCharged, 10);
  });

  test('a restart while suspended or after resuming charges no period twice', async () => {
    const h = await harness();
    await h.grant('user:alice', 'per-minute', 1_000_000);
    const id = await h.running(mpi({ product: { id: 'per-minute', category: 'per-minute' } }));
    await h.monitorAt(90 * MINUTE);
    await h.service.suspend(alice, [id]);
    await h.service.stop();

    // A restart: a new service over the same store and backend, then another after the resume.
    // Its own monitoring loop runs every 10 minutes of the manual clock, beside the passes the test
    // places: at the default second, the 22.5 hours the clock moves through while the job is
    // suspended were up to 81,000 passes, 70-80 s for this one test (0.4 s now).
    const restart = async () => {
      const service = createJobService({
        store: h.store,
        env: { ...env(), products: [...products, ...Object.values(PER)] },
        backend: h.backend,
        clock: h.clock,
        requireCredits: true,
        monitorIntervalMs: 10 * MINUTE,
      });
      await service.start();
      return service;
    };
    let service = await restart();
    await h.clock.advanceTo(T0 + DAY);
    await service.monitor();
    await service.unsuspend(alice, [id]);
    await until(async () => (await h.state(id)) === 'RUNNING', { describe: `${id} runs again` });
    await h.clock.advanceTo(T0 + DAY + 15 * MINUTE);
    await service.monitor();
    await service.stop();
    service = await restart();
    await service.monitor();
    await h.clock.advanceTo(T0 + DAY + 30 * MINUTE);
    await service.monitor();
    await service.terminate(alice, [id]);
    await service.stop();

    assert.equal(await periodsOf(h, 'user:alice'), 120);
    assert.equal((await h.job(id)).billing.creditsCharged, 120);
  });

  test('a suspension charge made again (a retry) charges nothing', async () => {
    // Sits before Accounting and keeps the context and job of the suspension, to replay it.
    const seen: { ctx: LifecycleContext; job: ActiveJob }[] = [];
    const spy: JobPlugin = { name: 'Spy', onJobSuspend: (ctx, job) => void seen.push({ ctx, job }) };
    const at = PLUGINS.findIndex((p) => p.name === 'Accounting');
    const h = await harness({ plugins: [...PLUGINS.slice(0, at), spy, ...PLUGINS.slice(at)] });
    await h.grant('user:alice', 'per-minute', 1_000_000);
    const id = await h.running(mpi({ product: { id: 'per-minute', category: 'per-minute' } }));
    await h.clock.advanceTo(T0 + 90 * MINUTE + 1);
    await h.service.suspend(alice, [id]);
    assert.equal((await h.job(id)).billing.creditsCharged, 91);
    const { ctx, job } = seen[0]!;
    await accountingPlugin.onJobSuspend?.(ctx, job);
    assert.equal((await h.job(id)).billing.creditsCharged, 91);
    assert.equal((await h.charges('user:alice')).length, 1);
  });
});

describe('retries', () => {
  test('monitoring twice at the same time charges once, sequentially or concurrently', async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-standard', 1000);
    const id = await h.running(mpi());
    await h.monitorAt(2 * MINUTE);
    await h.monitorAt(2 * MINUTE);
    await h.clock.advanceTo(T0 + 3 * MINUTE);
    await Promise.all([h.service.monitor(), h.service.monitor()]);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.credits]),
      [
        [`${id}:0-1`, 4],
        [`${id}:2-2`, 2],
      ],
    );
    assert.equal((await h.job(id)).billing.creditsCharged, 6);
  });

  test('a replayed charge (same charge id) is ignored', async () => {
    // Sits before Accounting and records every charge it makes, and the context to replay it with.
    const seen: { ctx: LifecycleContext; charge: Charge }[] = [];
    const spy: JobPlugin = {
      name: 'Spy',
      onJobMonitoring(ctx) {
        const charge = ctx.charge;
        ctx.charge = (c) => {
          seen.push({ ctx, charge: c });
          return charge(c);
        };
      },
    };
    const at = PLUGINS.findIndex((p) => p.name === 'Accounting');
    const h = await harness({ plugins: [...PLUGINS.slice(0, at), spy, ...PLUGINS.slice(at)] });
    await h.grant('user:alice', 'u1-standard', 1000);
    const id = await h.running(mpi());
    await h.monitorAt(2 * MINUTE);
    assert.equal(seen.length, 1);
    assert.equal((await h.job(id)).billing.creditsCharged, 4);

    // 996 left, of which the running job holds back 2 (2 units for its next minute).
    const { ctx, charge } = seen[0]!;
    assert.deepEqual(await ctx.charge(charge), { creditsLeft: 994, unpaid: 0 });
    assert.deepEqual(await ctx.charge({ ...charge }), { creditsLeft: 994, unpaid: 0 });
    assert.equal((await h.charges('user:alice')).length, 1);
    assert.equal((await h.job(id)).billing.creditsCharged, 4);

    // The store itself keeps a charge id once.
    const [recorded] = await h.charges('user:alice');
    assert.equal(await h.store.accounting.charge({ ...recorded!, chargedAt: T0 + HOUR }), false);
    assert.equal((await h.job(id)).billing.creditsCharged, 4);
  });
});

describe('credits', () => {
  test('an owner without an allocation cannot create a job (402 naming the category)', async () => {
    const h = await harness();
    await rejectsWith(h.service.create(alice, [mpi()]), 402, /u1-standard/);
    await h.grant('user:alice', 'u1-gpu', 1000);
    await rejectsWith(
      h.service.create(alice, [mpi()]),
      402,
      /user alice has no allocation for u1-standard: run in a project that has credits/,
    );
    assert.equal((await h.store.jobs.active()).length, 0);
  });

  test('allocations count only inside their validity window', async () => {
    // The end is exclusive; the start inclusive.
    const h = await harness({ start: T0 - DAY });
    await h.grant('user:alice', 'u1-standard', 1000, T0 - 2 * DAY, T0 - DAY);
    await h.grant('user:alice', 'u1-standard', 1000, T0 + DAY, T0 + 2 * DAY);
    await rejectsWith(h.service.create(alice, [mpi()]), 402);
    await h.clock.advanceTo(T0);
    await rejectsWith(h.service.create(alice, [mpi()]), 402, /u1-standard/);
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'user:alice', category: 'u1-standard', allocated: 0, used: 0, balance: 0 },
    ]);
    await h.clock.advanceTo(T0 + DAY);
    const [id] = await h.service.create(alice, [mpi()]);
    assert.ok(id);
    assert.equal((await h.service.wallets(alice))[0]!.allocated, 1000);
  });

  test("an owner who cannot pay for its jobs' next minute has them stopped and new ones refused", async () => {
    const h = await harness();
    await h.grant('user:alice', 'u1-standard', 10);
    await h.grant('user:bob', 'u1-standard', 1000);
    const two = await h.running(mpi());
    const one = await h.running(mpi({ product: STANDARD_1 }));
    const bobs = await h.running(mpi(), bob);

    // Monitoring once a minute, as the service's pass every second does.
    await h.monitorAt(MINUTE);
    await h.monitorAt(2 * MINUTE);
    assert.equal((await h.service.wallets(alice))[0]!.balance, 4);
    assert.equal(await h.state(two), 'RUNNING');
    assert.equal(await h.state(one), 'RUNNING');

    // At 3 minutes 1 credit is left, and the next minute of both costs 3: both stop, and neither
    // pays for the minute it was stopped in.
    await h.monitorAt(3 * MINUTE);
    for (const id of [two, one]) {
      assert.equal(await h.state(id), 'SUCCESS', id);
      assert.equal((await h.job(id)).updates.at(-1)!.status, NO_CREDITS_STATUS);
    }
    assert.equal(NO_CREDITS_STATUS, 'The job was terminated (no credits)');
    assert.equal(await h.state(bobs), 'RUNNING');
    // Three minutes of 2 + 1 units: 9 credits, charged once each, whichever job ran dry first.
    assert.equal((await h.job(two)).billing.creditsCharged, 6);
    assert.equal((await h.job(one)).billing.creditsCharged, 3);
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'user:alice', category: 'u1-standard', allocated: 10, used: 9, balance: 1 },
    ]);
    await rejectsWith(
      h.service.create(alice, [mpi()]),
      402,
      /user alice has 1 credits left for u1-standard and this job needs 2/,
    );
    assert.deepEqual(await h.service.wallets(bob), [
      { owner: 'user:bob', category: 'u1-standard', allocated: 1000, used: 6, balance: 994 },
    ]);
  });

  test('a late pass charges only the periods the balance pays, and stops the job at once', async () => {
    const h = await harness();
    await h.grant('user:alice', 'per-minute', 3);
    const id = await h.running(mpi({ product: { id: 'per-minute', category: 'per-minute' } }));
    // The first pass comes at 4.5 minutes (a loaded machine, a takeover): 4 periods due, 3 paid for.
    await h.monitorAt(4 * MINUTE + 30 * SECOND);
    assert.equal(await h.state(id), 'SUCCESS');
    assert.equal((await h.job(id)).updates.at(-1)!.status, NO_CREDITS_STATUS);
    assert.deepEqual(
      (await h.charges('user:alice')).map((c) => [c.chargeId, c.credits]),
      [[`${id}:0-2`, 3]],
    );
    assert.deepEqual(await h.service.wallets(alice), [
      { owner: 'user:alice', category: 'per-minute', allocated: 3, used: 3, balance: 0 },
    ]);
  });
});
