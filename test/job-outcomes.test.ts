import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend, BackendEvent } from '../src/jobs/backend.ts';
import { asDecidedEnd, outcomeAtEnd } from '../src/jobs/lifecycle.ts';
import { createJobService } from '../src/jobs/service.ts';
import { Job } from '../src/model/job.ts';
import { isFinal } from '../src/model/job-states.ts';
import { parser } from '../src/model/validate.ts';
import type { Store } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { type ManualClock, manualClock } from './support/manual-clock.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

/**
 * Honest outcomes: UCloud's states stay (a cancelled job is SUCCESS), and every final job says how
 * it ended: completed, cancelled by whom, stopped for lack of credits, expired, never started,
 * failed with the reason. The backend's own account of a job ucompute is stopping does not change
 * that end.
 */

const T0 = Date.UTC(2025, 0, 1);
const MINUTE = 60_000;
const alice = { username: 'alice', admin: false };
const admin = { username: 'admin', admin: true };
const mpi = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  timeAllocation: null,
  ...extra,
});
const jobSchema = parser(Job);

/** A dry backend whose events can be held back (a queue that starts nothing) or added to. */
function controllable(clock: ManualClock, store: Store) {
  const dry = dryBackend({ runForMs: null, clock });
  const listeners: ((e: BackendEvent) => void)[] = [];
  let starting = true;
  /** What the backend says of a job while ucompute cancels it, before the cancel returns. */
  let onCancel: ((jobId: string) => BackendEvent | undefined) | undefined;
  const backend: Backend = {
    ...dry,
    onEvent(listener) {
      listeners.push(listener);
      dry.onEvent((e) => {
        if (starting || e.state !== 'RUNNING') listener(e);
      });
    },
    async cancel(jobId) {
      const said = onCancel?.(jobId);
      if (said) {
        for (const l of listeners) l(said);
        // Its end is written before the cancel returns, as a slow backend's would be.
        await until(async () => isFinal((await store.jobs.get(jobId))!.state), {
          describe: `the end the backend told of ${jobId} is written`,
        });
      }
      await dry.cancel(jobId);
    },
  };
  return {
    backend,
    emit: (e: BackendEvent) => {
      for (const l of listeners) l(e);
    },
    holdStarts: () => {
      starting = false;
    },
    sayOnCancel: (f: typeof onCancel) => {
      onCancel = f;
    },
  };
}

async function world(credits = 1_000_000) {
  const clock = manualClock(T0);
  const store = await openTestStore();
  const control = controllable(clock, store);
  const service = createJobService({
    store,
    env: env(),
    backend: control.backend,
    clock,
    requireCredits: true,
  });
  await store.accounting.grant('user:alice', 'u1-standard', credits, T0 - MINUTE, T0 + 1000 * MINUTE);
  const job = async (id: string) => {
    const j = await service.retrieve(admin, id);
    assert.ok(jobSchema.check(j), JSON.stringify(jobSchema.check(j) || jobSchema.issues(j)));
    return j;
  };
  const submit = async (extra: Record<string, unknown> = {}) =>
    (await service.create(alice, [mpi(extra)]))[0]!;
  const running = async (extra: Record<string, unknown> = {}) => {
    const id = await submit(extra);
    await until(async () => (await job(id)).status.state === 'RUNNING', { describe: `${id} runs` });
    return id;
  };
  return { clock, store, service, job, submit, running, ...control };
}

describe('every final job says how it ended', () => {
  test('completed, with its exit codes', async () => {
    const w = await world();
    const id = await w.running({ replicas: 2 });
    w.emit({ jobId: id, state: 'SUCCESS', status: 'done', exitCodes: { 0: 0, 1: 3 }, at: T0 });
    await until(async () => (await w.job(id)).status.state === 'SUCCESS', { describe: 'it ends' });
    assert.deepEqual((await w.job(id)).status.outcome, {
      kind: 'COMPLETED',
      text: 'completed (exit 3 on rank 1)',
    });
  });

  test('cancelled: by whom; a queued job that is cancelled never started', async () => {
    const w = await world();
    const ran = await w.running();
    await w.service.terminate(alice, [ran]);
    assert.equal((await w.job(ran)).status.state, 'SUCCESS', "UCloud's state stays");
    assert.deepEqual((await w.job(ran)).status.outcome, {
      kind: 'CANCELLED',
      by: 'alice',
      text: 'cancelled by alice',
    });
    w.holdStarts();
    const queued = await w.submit();
    await w.service.terminate(admin, [queued]);
    assert.deepEqual((await w.job(queued)).status.outcome, {
      kind: 'NEVER_STARTED',
      reason: 'cancelled',
      by: 'admin',
      text: 'never started (cancelled by admin)',
    });
  });

  test('stopped for lack of credits, running or queued', async () => {
    // Two credits a minute, five in all.
    const w = await world(5);
    const ran = await w.running();
    w.holdStarts();
    const queued = await w.submit();
    await w.clock.advanceTo(T0 + 10 * MINUTE);
    await w.service.monitor();
    await until(async () => (await w.job(queued)).status.state === 'SUCCESS', { describe: 'both end' });
    assert.equal((await w.job(ran)).status.state, 'SUCCESS');
    assert.deepEqual((await w.job(ran)).status.outcome, {
      kind: 'OUT_OF_CREDITS',
      text: 'stopped: out of credits',
    });
    assert.equal((await w.job(queued)).status.outcome?.kind, 'NEVER_STARTED');
    assert.equal((await w.job(queued)).status.outcome?.text, 'never started (stopped: out of credits)');
  });

  test('expired', async () => {
    const w = await world();
    const id = await w.running({ timeAllocation: { hours: 0, minutes: 1, seconds: 0 } });
    await w.clock.advanceTo(T0 + 2 * MINUTE);
    await w.service.monitor();
    assert.equal((await w.job(id)).status.state, 'EXPIRED');
    assert.deepEqual((await w.job(id)).status.outcome, {
      kind: 'EXPIRED',
      text: 'expired: its time allocation ran out',
    });
  });

  test('failed, with the reason the backend gave', async () => {
    const w = await world();
    const id = await w.running();
    const reason = 'init container ucloud-compat exited with code 126: bwrap: Permission denied';
    w.emit({ jobId: id, state: 'FAILURE', status: reason, at: T0 });
    await until(async () => (await w.job(id)).status.state === 'FAILURE', { describe: 'it fails' });
    assert.deepEqual((await w.job(id)).status.outcome, {
      kind: 'FAILED',
      reason,
      text: `failed (${reason})`,
    });
  });

  test("an end the backend reports while ucompute stops the job is ucompute's end", async () => {
    const w = await world();
    const cancelled = await w.running();
    const expiring = await w.running({ timeAllocation: { hours: 0, minutes: 1, seconds: 0 } });
    // Killed, its replicas exit 143, or the backend calls it a failure.
    w.sayOnCancel((jobId) =>
      jobId === cancelled
        ? { jobId, state: 'SUCCESS', status: 'exit 143', exitCodes: { 0: 143 }, at: T0 }
        : { jobId, state: 'FAILURE', status: 'Terminated', at: T0 },
    );
    await w.service.terminate(alice, [cancelled]);
    assert.equal((await w.job(cancelled)).status.outcome?.text, 'cancelled by alice');
    await w.clock.advanceTo(T0 + 2 * MINUTE);
    await w.service.monitor();
    await until(async () => (await w.job(expiring)).status.outcome !== undefined, { describe: 'it ends' });
    assert.equal((await w.job(expiring)).status.state, 'EXPIRED');
    assert.equal((await w.job(expiring)).status.outcome?.kind, 'EXPIRED');
    const updates = (await w.job(expiring)).updates;
    assert.equal(updates.at(-1)?.state, 'EXPIRED', 'the update says the state the job has');
  });

  test('a restartOnExit job that is cancelled ends; it is not run again', async () => {
    const w = await world();
    const id = await w.running({ restartOnExit: true });
    w.sayOnCancel((jobId) => ({ jobId, state: 'SUCCESS', status: 'exit 0', exitCodes: { 0: 0 }, at: T0 }));
    await w.service.terminate(alice, [id]);
    assert.equal((await w.job(id)).status.state, 'SUCCESS');
    assert.equal((await w.job(id)).status.outcome?.kind, 'CANCELLED');
  });

  test('how ucompute was ending a job survives a restart: its end after it is that one', async () => {
    const w = await world();
    const id = await w.running();
    // The server stopped after recording the cancel and before the backend stopped the job.
    assert.ok(await w.store.jobs.markEnding(id, { kind: 'CANCELLED', by: 'alice' }));
    assert.equal((await w.job(id)).status.outcome, undefined, 'an active job shows no outcome');
    w.emit({ jobId: id, state: 'FAILURE', status: 'the pod was deleted', at: T0 });
    await until(async () => (await w.job(id)).status.outcome !== undefined, { describe: 'it ends' });
    assert.equal((await w.job(id)).status.state, 'SUCCESS');
    assert.equal((await w.job(id)).status.outcome?.text, 'cancelled by alice');
  });

  test('browse filters final jobs by outcome', async () => {
    const w = await world();
    const cancelled = await w.running();
    await w.service.terminate(alice, [cancelled]);
    const completed = await w.running();
    w.emit({ jobId: completed, state: 'SUCCESS', status: 'done', exitCodes: { 0: 0 }, at: T0 });
    await until(async () => (await w.job(completed)).status.state === 'SUCCESS', { describe: 'it ends' });
    const active = await w.running();
    const ids = async (filterOutcome: 'CANCELLED' | 'COMPLETED' | 'FAILED') =>
      (await w.service.browse(alice, { filterOutcome })).items.map((j) => j.id);
    assert.deepEqual(await ids('CANCELLED'), [cancelled]);
    assert.deepEqual(await ids('COMPLETED'), [completed]);
    assert.deepEqual(await ids('FAILED'), []);
    assert.ok(
      !(await w.service.browse(alice, { filterState: 'RUNNING' })).items.some((j) => j.id !== active),
    );
  });
});

describe('deciding the end (pure)', () => {
  const record = (
    state: 'IN_QUEUE' | 'RUNNING' | 'SUSPENDED',
    outcome: null | { kind: 'CANCELLED' | 'EXPIRED' },
  ) =>
    ({ state, startedAt: state === 'IN_QUEUE' ? null : T0, outcome }) as Parameters<typeof asDecidedEnd>[0];

  test('a backend end of a job being ended becomes that end, where the state machine allows it', () => {
    const end = { timestamp: T0, state: 'FAILURE' as const, status: 'Terminated' };
    assert.equal(asDecidedEnd(record('RUNNING', { kind: 'CANCELLED' }), end).state, 'SUCCESS');
    assert.equal(asDecidedEnd(record('RUNNING', { kind: 'EXPIRED' }), end).state, 'EXPIRED');
    // EXPIRED follows RUNNING only: a suspended job being expired ends as the backend says.
    assert.equal(asDecidedEnd(record('SUSPENDED', { kind: 'EXPIRED' }), end).state, 'FAILURE');
    assert.equal(asDecidedEnd(record('RUNNING', null), end).state, 'FAILURE');
    const status = { timestamp: T0, status: 'still running' };
    assert.equal(asDecidedEnd(record('RUNNING', { kind: 'CANCELLED' }), status), status);
  });

  test('the outcome: as ucompute ended it, never started without a start, else by the state', () => {
    const at = { timestamp: T0 };
    assert.equal(
      outcomeAtEnd(record('IN_QUEUE', { kind: 'CANCELLED' }), 'SUCCESS', at).kind,
      'NEVER_STARTED',
    );
    assert.equal(outcomeAtEnd(record('RUNNING', { kind: 'CANCELLED' }), 'SUCCESS', at).kind, 'CANCELLED');
    assert.equal(outcomeAtEnd(record('RUNNING', null), 'SUCCESS', at).kind, 'COMPLETED');
    assert.equal(outcomeAtEnd(record('IN_QUEUE', null), 'SUCCESS', at).kind, 'COMPLETED');
    assert.equal(outcomeAtEnd(record('RUNNING', null), 'EXPIRED', at).kind, 'EXPIRED');
    assert.deepEqual(outcomeAtEnd(record('IN_QUEUE', null), 'FAILURE', { ...at, status: 'no image' }), {
      kind: 'FAILED',
      reason: 'no image',
    });
  });
});
