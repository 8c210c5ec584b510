import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { decideUpdate, TRANSITIONS } from '../src/jobs/lifecycle.ts';
import { createJobService } from '../src/jobs/service.ts';
import { type JobSpecification, JobState, type JobUpdate } from '../src/model/job.ts';
import { FINAL_STATES } from '../src/model/job-states.ts';
import type { JobRecord } from '../src/store/jobs.ts';
import { openSqliteStore } from '../src/store/sqlite/store.ts';
import { env } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';

const STATES: JobState[] = JobState.anyOf.map((s) => s.const);
const T0 = Date.UTC(2025, 0, 1);
const HOUR = 3_600_000;
const SPEC: JobSpecification = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

/**
 * Written out here rather than read from TRANSITIONS, so that a change to the state machine has
 * to change this table too. EXPIRED only ever follows RUNNING: the clock runs nowhere else.
 */
const ALLOWED: Record<JobState, JobState[]> = {
  IN_QUEUE: ['RUNNING', 'CANCELING', 'SUCCESS', 'FAILURE', 'SUSPENDED'],
  RUNNING: ['CANCELING', 'SUCCESS', 'FAILURE', 'EXPIRED', 'SUSPENDED'],
  CANCELING: ['SUCCESS', 'FAILURE'],
  SUSPENDED: ['IN_QUEUE', 'RUNNING', 'CANCELING', 'SUCCESS', 'FAILURE'],
  SUCCESS: [],
  FAILURE: [],
  EXPIRED: [],
};

/** A stored job in `state`; a running one started at T0 with an hour's allocation. */
function record(state: JobState, overrides: Partial<JobRecord> = {}): JobRecord {
  const running = state === 'RUNNING';
  return {
    id: 'job1',
    createdBy: 'alice',
    project: null,
    state,
    application: 'mpi-hello',
    createdAt: T0,
    specification: SPEC,
    timeAllocationMs: HOUR,
    startedAt: running ? T0 : null,
    expiresAt: running ? T0 + HOUR : null,
    outputFolder: null,
    exitCodes: null,
    submitted: true,
    pricePerUnit: 1,
    creditsCharged: 0,
    chargedPeriods: 0,
    runStartedAt: running ? T0 : null,
    timeRunBeforeMs: 0,
    annotations: null,
    updateCount: 1,
    outcome: null,
    ...overrides,
  };
}

describe('the transition table', () => {
  test('lists every state, and the final ones are SUCCESS, FAILURE and EXPIRED', () => {
    assert.deepEqual([...STATES].sort(), Object.keys(ALLOWED).sort());
    assert.deepEqual([...FINAL_STATES].sort(), ['EXPIRED', 'FAILURE', 'SUCCESS']);
    for (const from of STATES)
      assert.deepEqual([...(TRANSITIONS[from] ?? [])].sort(), [...(ALLOWED[from] ?? [])].sort(), from);
  });

  const at = T0 + 5000;
  for (const from of STATES) {
    for (const to of STATES) {
      const final = FINAL_STATES.has(from);
      const allowed = ALLOWED[from]?.includes(to) === true;
      const expected = final ? 'reject' : from === to || allowed ? 'apply' : 'reject';
      test(`${from} → ${to}: ${expected}`, () => {
        const decision = decideUpdate(record(from), { timestamp: at, state: to });
        assert.equal(decision.kind, expected, decision.kind === 'apply' ? '' : decision.reason);
        if (decision.kind !== 'apply') return;
        if (from === to) {
          // A repeated state is a status update: it changes nothing, least of all the start time.
          assert.deepEqual(decision.changes, {});
          return;
        }
        assert.equal(decision.changes.state, to);
        if (to === 'RUNNING') {
          assert.equal(decision.changes.startedAt, at);
          assert.equal(decision.changes.expiresAt, at + HOUR);
        } else {
          assert.equal(decision.changes.startedAt, undefined);
          assert.equal(decision.changes.expiresAt, undefined);
        }
      });
    }
  }

  test('RUNNING without a time allocation has no deadline', () => {
    for (const from of ['IN_QUEUE', 'SUSPENDED'] as const) {
      const decision = decideUpdate(record(from, { timeAllocationMs: null }), {
        timestamp: T0 + 7,
        state: 'RUNNING',
      });
      assert.equal(decision.kind, 'apply');
      assert.deepEqual(decision.kind === 'apply' && decision.changes, {
        state: 'RUNNING',
        startedAt: T0 + 7,
        runStartedAt: T0 + 7,
        expiresAt: null,
      });
    }
  });

  test('a suspension ends the run and adds its time; the next run starts its own clock', () => {
    const running = record('RUNNING', { runStartedAt: T0 + HOUR, timeRunBeforeMs: 5000 });
    const suspended = decideUpdate(running, { timestamp: T0 + 2 * HOUR, state: 'SUSPENDED' });
    assert.deepEqual(suspended.kind === 'apply' && suspended.changes, {
      state: 'SUSPENDED',
      runStartedAt: null,
      timeRunBeforeMs: HOUR + 5000,
    });
    const queued = record('IN_QUEUE', { runStartedAt: null, timeRunBeforeMs: 7000 });
    const fromQueue = decideUpdate(queued, { timestamp: T0 + 3 * HOUR, state: 'SUSPENDED' });
    assert.deepEqual(fromQueue.kind === 'apply' && fromQueue.changes, { state: 'SUSPENDED' });
    const resumed = decideUpdate(record('SUSPENDED', { runStartedAt: null, timeRunBeforeMs: 7000 }), {
      timestamp: T0 + 4 * HOUR,
      state: 'RUNNING',
    });
    assert.equal(resumed.kind === 'apply' && resumed.changes.runStartedAt, T0 + 4 * HOUR);
    assert.equal(resumed.kind === 'apply' && resumed.changes.timeRunBeforeMs, undefined);
  });
});

describe('updates', () => {
  const finals = [...FINAL_STATES];

  test('a final job rejects everything, status-only updates included', () => {
    const updates: JobUpdate[] = [
      { timestamp: T0, status: 'still there?' },
      { timestamp: T0, outputFolder: '/home/alice/elsewhere' },
      { timestamp: T0, newTimeAllocation: 2 * HOUR },
      { timestamp: T0, state: 'RUNNING', expectedDifferentState: true },
      { timestamp: T0 },
    ];
    for (const state of finals) {
      for (const u of updates) {
        assert.equal(decideUpdate(record(state), u).kind, 'reject', `${state} ${JSON.stringify(u)}`);
      }
    }
  });

  test('a status-only update applies to a job that has not ended', () => {
    for (const state of STATES.filter((s) => !FINAL_STATES.has(s))) {
      const decision = decideUpdate(record(state), { timestamp: T0, status: 'hello' });
      assert.deepEqual(decision, { kind: 'apply', changes: {} }, state);
    }
  });

  test('an update whose expectedState differs from the state is dropped', () => {
    const decision = decideUpdate(record('RUNNING'), {
      timestamp: T0,
      state: 'SUCCESS',
      expectedState: 'IN_QUEUE',
    });
    assert.equal(decision.kind, 'drop');
    const matching = decideUpdate(record('IN_QUEUE'), {
      timestamp: T0,
      state: 'RUNNING',
      expectedState: 'IN_QUEUE',
    });
    assert.equal(matching.kind, 'apply');
  });

  test('an update with expectedDifferentState and the same state is dropped', () => {
    for (const state of STATES.filter((s) => !FINAL_STATES.has(s))) {
      const decision = decideUpdate(record(state), { timestamp: T0, state, expectedDifferentState: true });
      assert.equal(decision.kind, 'drop', state);
    }
    const moving = decideUpdate(record('IN_QUEUE'), {
      timestamp: T0,
      state: 'RUNNING',
      expectedDifferentState: true,
    });
    assert.equal(moving.kind, 'apply');
  });

  test('newTimeAllocation moves the deadline of a running job', () => {
    const decision = decideUpdate(record('RUNNING', { startedAt: T0 + 10 }), {
      timestamp: T0 + 20,
      newTimeAllocation: 3 * HOUR,
    });
    assert.deepEqual(decision, {
      kind: 'apply',
      changes: { timeAllocationMs: 3 * HOUR, expiresAt: T0 + 10 + 3 * HOUR },
    });
  });

  test('newTimeAllocation of a queued job changes the allocation, not a deadline it does not have', () => {
    const decision = decideUpdate(record('IN_QUEUE'), { timestamp: T0, newTimeAllocation: 2 * HOUR });
    assert.deepEqual(decision, { kind: 'apply', changes: { timeAllocationMs: 2 * HOUR } });
  });

  test('newTimeAllocation is rejected for a job without a time limit', () => {
    for (const state of ['IN_QUEUE', 'RUNNING', 'SUSPENDED'] as const) {
      const decision = decideUpdate(record(state, { timeAllocationMs: null, expiresAt: null }), {
        timestamp: T0,
        newTimeAllocation: HOUR,
      });
      assert.equal(decision.kind, 'reject', state);
    }
  });
});

describe('updates through the store', () => {
  const alice = { username: 'alice', admin: false };

  async function setUp() {
    // SQLite's own: the rows are read as stored.
    const store = openSqliteStore(':memory:');
    const service = createJobService({
      store,
      env: env(),
      backend: dryBackend({ runForMs: null }),
      requireCredits: false,
      clock: manualClock(T0),
    });
    // Inserted directly and never submitted: only the updates below move it.
    await store.jobs.insert([
      {
        id: 'job1',
        createdBy: 'alice',
        project: null,
        application: 'mpi-hello',
        createdAt: T0,
        specification: SPEC,
        timeAllocationMs: HOUR,
        pricePerUnit: 1,
        firstUpdate: { timestamp: T0, state: 'IN_QUEUE', status: 'The job is in the queue' },
      },
    ]);
    // The rows as stored: seq numbers and the timestamps of their bodies.
    const rows = () =>
      (
        store.database
          .prepare('select seq, body from job_updates where job_id = ? order by seq')
          .all('job1') as {
          seq: number;
          body: string;
        }[]
      ).map((r) => [Number(r.seq), (JSON.parse(r.body) as JobUpdate).timestamp]);
    return { store, service, rows };
  }

  test('updates are appended in order with increasing seq; rejected and dropped ones leave no trace', async () => {
    const { store, service, rows } = await setUp();
    assert.equal(await service.update('job1', { timestamp: T0 + 1, state: 'RUNNING' }), true);
    assert.equal(await service.update('job1', { timestamp: T0 + 2, state: 'IN_QUEUE' }), false);
    assert.equal(
      await service.update('job1', { timestamp: T0 + 3, state: 'RUNNING', expectedDifferentState: true }),
      false,
    );
    assert.equal(await service.update('job1', { timestamp: T0 + 4, status: 'half way' }), true);
    assert.equal(await service.update('job1', { timestamp: T0 + 5, state: 'SUCCESS' }), true);
    assert.equal(await service.update('job1', { timestamp: T0 + 6, status: 'too late' }), false);

    assert.deepEqual(
      (await store.jobs.updatesOf('job1')).map((u) => [u.timestamp, u.state ?? null, u.status ?? null]),
      [
        [T0, 'IN_QUEUE', 'The job is in the queue'],
        [T0 + 1, 'RUNNING', null],
        [T0 + 4, null, 'half way'],
        [T0 + 5, 'SUCCESS', null],
      ],
    );
    assert.deepEqual(rows(), [
      [0, T0],
      [1, T0 + 1],
      [2, T0 + 4],
      [3, T0 + 5],
    ]);
    assert.equal((await store.jobs.get('job1'))!.updateCount, 4);
    assert.equal((await store.jobs.get('job1'))!.state, 'SUCCESS');
  });

  test('status.startedAt is the latest move to RUNNING, and the deadline follows it', async () => {
    const { service } = await setUp();
    assert.equal(await service.update('job1', { timestamp: T0 + 1000, state: 'RUNNING' }), true);
    let status = (await service.retrieve(alice, 'job1')).status;
    assert.equal(status.startedAt, T0 + 1000);
    assert.equal(status.expiresAt, T0 + 1000 + HOUR);

    assert.equal(await service.update('job1', { timestamp: T0 + 2000, state: 'SUSPENDED' }), true);
    assert.equal(await service.update('job1', { timestamp: T0 + 9000, state: 'RUNNING' }), true);
    status = (await service.retrieve(alice, 'job1')).status;
    assert.equal(status.state, 'RUNNING');
    assert.equal(status.startedAt, T0 + 9000);
    assert.equal(status.expiresAt, T0 + 9000 + HOUR);

    // A repeated RUNNING (a status report) does not restart the clock.
    assert.equal(
      await service.update('job1', { timestamp: T0 + 9500, state: 'RUNNING', status: 'ok' }),
      true,
    );
    assert.equal((await service.retrieve(alice, 'job1')).status.startedAt, T0 + 9000);
  });

  test('newTimeAllocation is stored with the update and moves expiresAt', async () => {
    const { store, service } = await setUp();
    await service.update('job1', { timestamp: T0 + 1000, state: 'RUNNING' });
    assert.equal(await service.update('job1', { timestamp: T0 + 2000, newTimeAllocation: 2 * HOUR }), true);
    const job = (await store.jobs.get('job1'))!;
    assert.equal(job.timeAllocationMs, 2 * HOUR);
    assert.equal(job.expiresAt, T0 + 1000 + 2 * HOUR);
    assert.equal((await store.jobs.updatesOf('job1')).at(-1)!.newTimeAllocation, 2 * HOUR);
  });
});
