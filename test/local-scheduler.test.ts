import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  describe as describeResources,
  fairOrder,
  queueStatus,
  type RunningJob,
  schedule,
  type WaitingJob,
} from '../src/backends/local/scheduler.ts';

const GiB = 2 ** 30;
const machine = { cpuMillis: 8000, memoryBytes: 32 * GiB };
const cpus = (n: number, gib = 1) => ({ cpuMillis: n * 1000, memoryBytes: gib * GiB });

function waiting(
  id: string,
  queue: string,
  demand = cpus(1),
  submittedAt = 0,
  extra: Partial<WaitingJob> = {},
): WaitingJob {
  return { id, queue, weight: 1, demand, submittedAt, timeLimitMs: null, ...extra };
}

test('owners take turns by dominant share: a newcomer goes before the busy owner’s backlog', () => {
  const running: RunningJob[] = [{ id: 'a0', queue: 'alice', holds: cpus(4), endsAt: null }];
  const order = fairOrder(machine, running, [
    waiting('a1', 'alice', cpus(1), 1),
    waiting('a2', 'alice', cpus(1), 2),
    waiting('b1', 'bob', cpus(1), 3),
    waiting('b2', 'bob', cpus(1), 4),
  ]);
  assert.deepEqual(
    order.map((j) => j.id),
    ['b1', 'b2', 'a1', 'a2'],
  );
});

test('memory counts as much as CPU: the dominant resource decides', () => {
  const running: RunningJob[] = [
    { id: 'a0', queue: 'alice', holds: cpus(1, 24), endsAt: null }, // 75% of memory
    { id: 'b0', queue: 'bob', holds: cpus(4, 1), endsAt: null }, // 50% of CPU
  ];
  const order = fairOrder(machine, running, [
    waiting('a1', 'alice', cpus(1), 1),
    waiting('b1', 'bob', cpus(1), 2),
  ]);
  assert.deepEqual(
    order.map((j) => j.id),
    ['b1', 'a1'],
  );
});

test('weights scale an owner’s share', () => {
  const running: RunningJob[] = [
    { id: 'a0', queue: 'alice', holds: cpus(4), endsAt: null },
    { id: 'b0', queue: 'bob', holds: cpus(2), endsAt: null },
  ];
  const order = fairOrder(machine, running, [
    waiting('a1', 'alice', cpus(1), 1, { weight: 4 }),
    waiting('b1', 'bob', cpus(1), 2),
  ]);
  assert.deepEqual(
    order.map((j) => j.id),
    ['a1', 'b1'],
  );
});

test('a large job at the head is not starved by a stream of small ones', () => {
  const now = 1_000_000;
  // 6 of 8 CPUs busy until now + 60 s; the big job needs all 8.
  const running: RunningJob[] = [{ id: 'r', queue: 'carol', holds: cpus(6), endsAt: now + 60_000 }];
  const big = waiting('big', 'alice', cpus(8), 1);
  const smalls = Array.from({ length: 5 }, (_, i) => waiting(`s${i}`, 'bob', cpus(1), 2 + i));
  const first = schedule(machine, running, [big, ...smalls], now);
  assert.deepEqual(first.start, [], 'small jobs without a time limit would delay the big one');
  assert.equal(first.waiting.get('big')?.position, 1);
  assert.match(first.waiting.get('big')?.reason ?? '', /^waiting for 8 CPUs and 1 GiB of memory \(2 CPUs/);
  assert.match(first.waiting.get('s0')?.reason ?? '', /behind a larger job that has the next turn/);

  // Small jobs that end before the big one could start anyway may fill the gap (backfill).
  const short = smalls.map((s) => ({ ...s, timeLimitMs: 30_000 }));
  const second = schedule(machine, running, [big, ...short], now);
  assert.deepEqual(second.start, ['s0', 's1']);
  assert.equal(second.waiting.get('s2')?.position, 2);

  // Once the running job has ended, the big job starts first.
  const third = schedule(machine, [], [big, ...smalls], now + 60_000);
  assert.deepEqual(third.start, ['big']);
});

test('a job fits when the whole gang fits, and not a replica before', () => {
  const running: RunningJob[] = [{ id: 'r', queue: 'alice', holds: cpus(7), endsAt: null }];
  const gang = waiting('gang', 'bob', cpus(2), 1);
  assert.deepEqual(schedule(machine, running, [gang], 0).start, []);
  assert.deepEqual(schedule(machine, [], [gang], 0).start, ['gang']);
});

test('owners at equal shares take turns: the one served longest ago goes first', () => {
  // Alice's first job just ended; both owners hold nothing now, and alice's backlog is older.
  const lastStarts = new Map([['alice', 1000]]);
  const order = fairOrder(
    machine,
    [],
    [
      waiting('a2', 'alice', cpus(1), 1),
      waiting('a3', 'alice', cpus(1), 2),
      waiting('b1', 'bob', cpus(1), 3),
    ],
    lastStarts,
  );
  assert.deepEqual(
    order.map((j) => j.id),
    ['b1', 'a2', 'a3'],
  );
  const small = { cpuMillis: 1000, memoryBytes: 4 * GiB };
  assert.deepEqual(
    schedule(small, [], [waiting('a2', 'alice', cpus(1), 1), waiting('b1', 'bob', cpus(1), 3)], 0, lastStarts)
      .start,
    ['b1'],
  );
});

test('a draining backlog changes the statuses of the head of the queue only, not of every job behind', () => {
  const one = { cpuMillis: 1000, memoryBytes: GiB };
  const n = 100;
  let backlog = Array.from({ length: n }, (_, i) => waiting(`j${i}`, 'alice', one, i));
  const said = new Map<string, string>();
  let changes = 0;
  for (let step = 0; step < n; step++) {
    const decision = schedule(one, [], backlog, 0);
    for (const [id, w] of decision.waiting) {
      const status = queueStatus(w);
      if (said.get(id) !== status) changes++;
      said.set(id, status);
    }
    backlog = backlog.filter((j) => !decision.start.includes(j.id));
  }
  // Every job told in full at each step would be n²/2 = 5,000 status updates; the head only, about 11n.
  assert.ok(changes < (n * n) / 4, `${changes} status changes`);
  assert.match(said.get('j99')!, /^In the queue, position 1: waiting for 1 CPU/);
});

test('a gang larger than the machine stays Pending with Volcano’s reason, and blocks no one behind it', () => {
  const huge = waiting('huge', 'alice', cpus(9, 40), 0);
  const small = waiting('small', 'alice', cpus(1), 1);
  const plan = schedule(machine, [{ id: 'r', queue: 'bob', holds: cpus(6), endsAt: null }], [huge, small], 0);
  assert.deepEqual(plan.start, ['small'], 'no reservation is held for a gang that can never fit');
  const why = plan.waiting.get('huge')!;
  assert.equal(why.unschedulable, true);
  assert.equal(
    queueStatus(why),
    'Pending, unschedulable: the gang needs 9 CPUs and 40 GiB of memory; this machine offers 8 CPUs and 32 GiB of memory (0/1 nodes are unavailable: 1 Insufficient cpu, 1 Insufficient memory)',
  );
});

test('the words for an amount are the same when asked again, for more amounts than are kept, each its own', () => {
  const words = (cpuMillis: number, memoryBytes: number) => {
    const cpu = cpuMillis / 1000;
    return `${+cpu.toFixed(2)} CPU${cpu === 1 ? '' : 's'} and ${+(memoryBytes / GiB).toFixed(2)} GiB of memory`;
  };
  // 3,000 amounts (past what is kept), twice over, with cpu and memory swapped so that no two
  // amounts could share words by a key made carelessly of the two numbers.
  for (let round = 0; round < 2; round++) {
    for (let i = 1; i <= 1500; i++) {
      assert.equal(
        describeResources({ cpuMillis: i * 10, memoryBytes: i * 2 ** 20 }),
        words(i * 10, i * 2 ** 20),
      );
      assert.equal(
        describeResources({ cpuMillis: i * 2 ** 20, memoryBytes: i * 10 }),
        words(i * 2 ** 20, i * 10),
      );
    }
  }
  assert.equal(describeResources({ cpuMillis: 1000, memoryBytes: GiB }), '1 CPU and 1 GiB of memory');
});
