import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fieldOf } from '../web/src/field-of.ts';
import { estimatedCost, pricePerHour, waitingNotice } from '../web/src/format.ts';
import { listFollower, type Shown, withJob } from '../web/src/job-list.ts';
import { initialRaw, parameterValue } from '../web/src/parameter-values.ts';
import type { Job, JobState, Parameter, Product } from '../web/src/types.ts';
import { seriesOf } from '../web/src/usage-series.ts';

// The web interface's own arithmetic and mapping, without a browser.

const standard: Product = {
  id: 'u1-standard-2',
  category: 'u1-standard',
  cpu: 2,
  memoryInGigs: 4,
  pricePerUnit: 1,
};
const gpu: Product = {
  id: 'u1-gpu-1',
  category: 'u1-gpu',
  cpu: 8,
  memoryInGigs: 48,
  gpu: 1,
  pricePerUnit: 60,
  unitOfPrice: 'CREDITS_PER_HOUR',
  pricedPer: 'GPU',
};

/** A job as the list shows it: `updates` many updates, the newest version having the most. */
const job = (
  id: string,
  createdAt: number,
  state: JobState = 'RUNNING',
  updates = 1,
  project?: string,
  kind?: string,
) =>
  ({
    id,
    createdAt,
    owner: { createdBy: 'alice', ...(project !== undefined ? { project } : {}) },
    status: { state, ...(kind ? { outcome: { kind, text: kind } } : {}) },
    updates: Array.from({ length: updates }, () => ({ timestamp: createdAt })),
    specification: { application: { name: 'app', version: '1' }, product: { id: 'p', category: 'c' } },
  }) as unknown as Job;

describe('the web interface', () => {
  test('a job that waits says why on its page: its queue, a suspend, or a hold for its owner’s storage quota', () => {
    const said = (state: JobState, ...statuses: (string | undefined)[]) =>
      waitingNotice({
        status: { state },
        updates: statuses.map((status, i) => ({ timestamp: i, ...(status !== undefined ? { status } : {}) })),
      } as unknown as Job);
    const held =
      'Held: the storage quota of user alice is used up: /home/alice … The job has not started; it goes back to the queue by itself …';
    assert.equal(said('SUSPENDED', 'The job is in the queue', held, undefined), held);
    assert.equal(said('SUSPENDED'), 'The job is suspended.');
    assert.equal(said('IN_QUEUE', 'Position 3 in the queue'), 'Position 3 in the queue');
    assert.equal(said('IN_QUEUE'), 'Waiting for a machine.');
    assert.equal(said('RUNNING', 'The job is running'), undefined);
    assert.equal(said('SUCCESS', held), undefined);
  });

  test('the launch form turns what was typed into the API’s values, a Workflow into its job script', () => {
    const common = { name: 'p', optional: true, title: 'P', description: '' };
    const workflow: Parameter = { ...common, type: 'workflow' };
    assert.deepEqual(parameterValue(workflow, 'echo {{ ucloud.rank }}'), {
      type: 'workflow',
      specification: { job: 'echo {{ ucloud.rank }}' },
    });
    assert.equal(parameterValue(workflow, ''), undefined);
    assert.equal(
      initialRaw({ ...workflow, defaultValue: { type: 'workflow', specification: { job: 'sleep 1' } } }),
      'sleep 1',
    );
    const integer: Parameter = { ...common, type: 'integer' };
    assert.deepEqual(parameterValue(integer, '12'), { type: 'integer', value: 12 });
    // What does not parse goes as typed, so that the server names the field.
    assert.deepEqual(parameterValue(integer, 'twelve'), { type: 'integer', value: 'twelve' });
    assert.deepEqual(parameterValue({ ...common, type: 'peer' }, 'abc'), {
      type: 'peer',
      jobId: 'abc',
      hostname: 'p',
    });
  });

  test('prices per hour count vCPUs, or GPUs for GPU-priced products, per period', () => {
    assert.equal(pricePerHour(standard), 120);
    assert.equal(pricePerHour(gpu), 60);
  });

  test('a run is estimated at every period it may start, for each replica', () => {
    assert.equal(estimatedCost(standard, 1, { hours: 1, minutes: 0, seconds: 0 }), 120);
    assert.equal(estimatedCost(standard, 3, { hours: 0, minutes: 1, seconds: 1 }), 2 * 2 * 3);
    // Per hour: 61 minutes are two started hours.
    assert.equal(estimatedCost(gpu, 1, { hours: 1, minutes: 1, seconds: 0 }), 120);
  });

  test("a server issue is shown at the field it names, whichever form of the job's path it has", () => {
    assert.equal(fieldOf('items[0].parameters.top'), 'param:top');
    assert.equal(fieldOf('items[0].specification.parameters.top.value'), 'param:top');
    assert.equal(fieldOf('items[0].product.id'), 'product');
    assert.equal(fieldOf('items[0].specification.timeAllocation'), 'timeAllocation');
    assert.equal(fieldOf('items[0].name'), 'name');
    assert.equal(fieldOf('items[0].replicas'), 'replicas');
    // The application's name is not the job's.
    assert.equal(fieldOf('items[0].application.name'), 'form');
    assert.equal(fieldOf('items[0]'), 'form');
  });

  test('usage is summed per UTC day and category, with a flat line for categories not used', () => {
    const day = 24 * 3600 * 1000;
    const from = Date.UTC(2026, 0, 1);
    const { days, byCategory } = seriesOf(
      [
        { owner: 'user:a', category: 'u1-standard', start: from + day, credits: 5 },
        { owner: 'project:p', category: 'u1-standard', start: from + day, credits: 2 },
        { owner: 'user:a', category: 'u1-gpu', start: from + 2 * day, credits: 7 },
      ],
      ['u1-standard', 'u1-secure'],
      from,
      from + 3 * day,
    );
    assert.deepEqual(days, [from, from + day, from + 2 * day]);
    assert.deepEqual(byCategory.get('u1-standard'), [0, 7, 0]);
    assert.deepEqual(byCategory.get('u1-gpu'), [0, 0, 7]);
    assert.deepEqual(byCategory.get('u1-secure'), [0, 0, 0]);
  });

  test('the jobs list takes each pushed job in its place, keeps the newer version, and follows its filters', () => {
    const all = { state: '', outcome: '', app: '', project: '' };
    const list = [job('c', 30), job('a', 10)];
    const ids = (jobs: readonly Job[]) => jobs.map((j) => j.id);

    assert.deepEqual(ids(withJob(list, job('b', 20), all, false)), ['c', 'b', 'a']);
    assert.deepEqual(ids(withJob(list, job('d', 40), all, true)), ['d', 'c', 'a']);
    // Older than every job shown: on a page not read yet, unless this is the last page.
    assert.deepEqual(ids(withJob(list, job('z', 5), all, true)), ['c', 'a']);
    assert.deepEqual(ids(withJob(list, job('z', 5), all, false)), ['c', 'a', 'z']);
    const ended = withJob(list, job('a', 10, 'SUCCESS', 2), all, false);
    assert.equal(ended[1]?.status.state, 'SUCCESS');
    assert.equal(withJob(ended, job('a', 10, 'RUNNING', 1), all, false)[1]?.status.state, 'SUCCESS');
    // Filtered by state: a job that leaves the state leaves the list, and one that enters it joins.
    const running = { ...all, state: 'RUNNING' };
    assert.deepEqual(ids(withJob(list, job('a', 10, 'SUCCESS', 2), running, false)), ['c']);
    assert.deepEqual(ids(withJob(list, job('b', 20, 'SUCCESS'), running, false)), ['c', 'a']);
    assert.deepEqual(ids(withJob(list, job('b', 20), { ...all, app: 'other' }, false)), ['c', 'a']);
    // In a project's workspace: only that project's jobs join.
    const inLab = { ...all, project: 'lab' };
    assert.deepEqual(ids(withJob(list, job('b', 20), inLab, false)), ['c', 'a']);
    assert.deepEqual(ids(withJob(list, job('b', 20, 'RUNNING', 1, 'lab'), inLab, false)), ['c', 'b', 'a']);
    // Filtered by outcome: a job joins when it ends that way, and only then.
    const cancelled = { ...all, outcome: 'CANCELLED' };
    assert.deepEqual(ids(withJob([], job('b', 20), cancelled, false)), []);
    assert.deepEqual(
      ids(withJob([], job('b', 20, 'SUCCESS', 2, undefined, 'COMPLETED'), cancelled, false)),
      [],
    );
    assert.deepEqual(ids(withJob([], job('b', 20, 'SUCCESS', 2, undefined, 'CANCELLED'), cancelled, false)), [
      'b',
    ]);
  });
  test('a read of the jobs list gets the changes seen while it was under way on top: it never takes a job back', () => {
    const all = { state: '', outcome: '', app: '', project: '' };
    const shown: Shown[] = [];
    const list = listFollower(all, (s) => shown.push(s));
    const states = () => list.shown().jobs?.map((j) => `${j.id}:${j.status.state}`);

    // The first read: a change arrives before its answer, which predates it.
    const first = list.reading();
    list.changed(job('a', 10, 'RUNNING', 2));
    assert.equal(list.shown().jobs, null, 'nothing shown before the first answer');
    first({ items: [job('a', 10, 'IN_QUEUE', 1)], next: null });
    assert.deepEqual(states(), ['a:RUNNING']);

    // A read after a resync crosses a job's end and another's creation.
    const again = list.reading();
    list.changed(job('a', 10, 'SUCCESS', 3));
    list.changed(job('b', 20, 'IN_QUEUE', 1));
    assert.deepEqual(states(), ['b:IN_QUEUE', 'a:SUCCESS']);
    again({ items: [job('a', 10, 'RUNNING', 2)], next: null });
    assert.deepEqual(states(), ['b:IN_QUEUE', 'a:SUCCESS']);

    // Once no read is under way, an answer is taken as it is (what was seen is forgotten).
    list.reading()({ items: [job('b', 20, 'RUNNING', 2)], next: null });
    assert.deepEqual(states(), ['b:RUNNING']);
    // A read that failed or was abandoned (null) changes nothing, and is no longer waited for.
    const failed = list.reading();
    list.changed(job('b', 20, 'SUCCESS', 3));
    failed(null);
    list.reading()({ items: [job('b', 20, 'RUNNING', 2)], next: null });
    assert.deepEqual(states(), ['b:RUNNING']);
    assert.equal(shown.at(-1), list.shown());
  });
});
