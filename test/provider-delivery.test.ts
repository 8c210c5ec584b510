import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CoreCallError } from '../src/provider/core-client.ts';
import { type DeliveryClock, laneOf, outboxDelivery } from '../src/provider/delivery.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

type Item = { id: string; update: { status: string } };

/** Core's `jobs/control/update` as a stub: answers each call on the next turn, or fails it. */
function stubCore(fails: (items: Item[]) => boolean = () => false) {
  const received: Item[] = [];
  const inFlight = new Set<Item[]>();
  let mostAtOnce = 0;
  let sharedAJob = false;
  return {
    received,
    mostAtOnce: () => mostAtOnce,
    sharedAJob: () => sharedAJob,
    async call<T>(_method: string, _path: string, body: unknown): Promise<T> {
      const items = (body as { items: Item[] }).items;
      const ids = new Set(items.map((i) => i.id));
      for (const other of inFlight) if (other.some((i) => ids.has(i.id))) sharedAJob = true;
      inFlight.add(items);
      mostAtOnce = Math.max(mostAtOnce, inFlight.size);
      await new Promise((r) => setImmediate(r));
      inFlight.delete(items);
      if (fails(items)) throw new CoreCallError(503, 'Core is restarting');
      received.push(...items);
      return {} as T;
    },
  };
}

/** Timers that run only when the test says so. */
function manualClock(): DeliveryClock & { fire(): void } {
  let pending: (() => void)[] = [];
  return {
    now: () => 0,
    setTimeout(fn) {
      pending.push(fn);
      return fn;
    },
    clearTimeout(handle) {
      pending = pending.filter((fn) => fn !== handle);
    },
    fire() {
      const due = pending;
      pending = [];
      for (const fn of due) fn();
    },
  };
}

/** `perJob` updates for each of `jobs` jobs, interleaved as jobs change state together. */
async function fill(jobs: number, perJob: number) {
  const { ucloudOutbox: outbox } = await openTestStore();
  for (let n = 0; n < perJob; n++) {
    for (let j = 0; j < jobs; j++) {
      await outbox.add('update', `j${j}`, { id: `j${j}`, update: { status: `${n}` } }, 0);
    }
  }
  return outbox;
}

const statusesOf = (received: Item[], id: string) =>
  received.filter((i) => i.id === id).map((i) => i.update.status);

test('several calls to Core at once, never two with the same job; every job hears its updates in order, once', async () => {
  const outbox = await fill(12, 5);
  const core = stubCore();
  const delivery = outboxDelivery({ outbox, core, batchSize: 3, lanes: 4, outOfCredits() {} });
  delivery.kick();
  await until(async () => (await outbox.size()) === 0, { describe: 'outbox empty' });
  await delivery.idle();
  assert.ok(core.mostAtOnce() > 1, `at most ${core.mostAtOnce()} call at once`);
  assert.ok(core.mostAtOnce() <= 4, `${core.mostAtOnce()} calls at once`);
  assert.equal(core.sharedAJob(), false);
  for (let j = 0; j < 12; j++)
    assert.deepEqual(statusesOf(core.received, `j${j}`), ['0', '1', '2', '3', '4']);
  await delivery.stop();
});

test("a lane that fails keeps its jobs' updates for after the back-off; the other lanes' calls finish", async () => {
  const outbox = await fill(8, 3);
  const clock = manualClock();
  let down = true;
  const failing = laneOf('j0', 4);
  const core = stubCore((items) => down && items.some((i) => laneOf(i.id, 4) === failing));
  const delivery = outboxDelivery({ outbox, core, batchSize: 2, lanes: 4, clock, outOfCredits() {} });
  delivery.kick();
  await until(() => delivery.failures() === 1, { describe: 'one failed pass' });
  await delivery.idle();
  // The first window (each job's first update) went out in every lane but the failing one.
  for (let j = 0; j < 8; j++) {
    const heard = statusesOf(core.received, `j${j}`);
    if (laneOf(`j${j}`, 4) === failing) assert.deepEqual(heard, []);
    else assert.deepEqual(heard, ['0', '1', '2'].slice(0, heard.length));
  }
  assert.ok(core.received.length > 0);
  down = false;
  clock.fire();
  await until(async () => (await outbox.size()) === 0, { describe: 'outbox empty after the back-off' });
  await delivery.idle();
  for (let j = 0; j < 8; j++) assert.deepEqual(statusesOf(core.received, `j${j}`), ['0', '1', '2']);
  await delivery.stop();
});
