import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Caller } from '../src/jobs/service.ts';
import type { Job } from '../src/model/job.ts';
import { normalisedDuration, readJobSpecification } from '../src/model/job-request.ts';
import { jobInState } from './support/server.ts';
import { createFrom, fixture, send, type World, world } from './support/ucloud.ts';

/**
 * UCloud's own clients against ucompute: request bodies replayed exactly as UCloud's web client
 * builds them (JSON fixtures under test/fixtures/ucloud-requests, each naming its UCloud source).
 */

const ADMIN: Caller = { username: 'root', admin: true };

describe('creating jobs as UCloud clients do', () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test("the web client's request is accepted; metadata, hostname and labels are read and ignored", async () => {
    const id = await createFrom(w, 'create-web-client');
    const job: Job = await w.service.retrieve(ADMIN, id);
    assert.deepEqual(job.specification.application, { name: 'word-count', version: '1.0' });
    assert.equal(job.specification.name, 'Counting words');
    assert.equal('hostname' in job.specification, false);
    assert.equal('labels' in job.specification, false);
    // 90 minutes are normalised as UCloud's SimpleDuration does.
    assert.deepEqual(job.specification.timeAllocation, { hours: 1, minutes: 30, seconds: 0 });
  });

  test('null and empty fields count as absent, as in UCloud Go core', async () => {
    const id = await createFrom(w, 'create-minimal');
    const job = await w.service.retrieve(ADMIN, id);
    assert.equal('name' in job.specification, false);
    assert.equal('openedFile' in job.specification, false);
    assert.deepEqual(job.specification.timeAllocation, { hours: 2, minutes: 0, seconds: 0 });
  });

  test('wrong values are still refused, as {why, errorCode} with the field-level issues', async () => {
    const base = fixture('create-web-client').request;
    const item = (base.items as Record<string, unknown>[])[0]!;
    const cases: [string, Record<string, unknown>, string][] = [
      ['a wrong type', { ...item, replicas: 'two' }, 'items[0].replicas'],
      [
        'an unknown parameter of the app',
        { ...item, parameters: { nope: { type: 'text', value: 'x' } } },
        'nope',
      ],
      ['an unknown product', { ...item, product: { id: 'u9', category: 'u1-standard' } }, 'product'],
      ['a field UCloud does not have', { ...item, timeAlocation: null }, 'timeAlocation'],
      ['a negative duration', { ...item, timeAllocation: { hours: 0, minutes: -5, seconds: 0 } }, 'minutes'],
    ];
    for (const [name, bad, path] of cases) {
      const r = await send(w, 'POST', '/api/jobs', { type: 'bulk', items: [bad] });
      assert.equal(r.status, 400, name);
      assert.equal(r.body.errorCode, 'BAD_REQUEST', name);
      assert.equal(typeof r.body.why, 'string', name);
      assert.equal(r.body.message, r.body.why, name);
      const issues = r.body.issues as { path: string }[];
      assert.ok(
        issues.some((i) => i.path.includes(path)),
        `${name}: ${JSON.stringify(issues)}`,
      );
    }
  });

  test('an unknown job answers 404 as {why, errorCode}', async () => {
    const r = await send(w, 'GET', '/api/jobs/retrieve?id=nosuchjob');
    assert.equal(r.status, 404);
    assert.equal(r.body.errorCode, 'NOT_FOUND');
    assert.match(r.body.why as string, /nosuchjob/);
  });
});

describe('reading a UCloud job specification', () => {
  test('durations are normalised by their total, as UCloud does', () => {
    assert.deepEqual(normalisedDuration({ hours: 0, minutes: 125, seconds: 61 }), {
      hours: 2,
      minutes: 6,
      seconds: 1,
    });
    assert.deepEqual(normalisedDuration({ minutes: 30 }), { hours: 0, minutes: 30, seconds: 0 });
    // Not whole non-negative numbers: left for the strict check to refuse.
    assert.deepEqual(normalisedDuration({ hours: 1.5, minutes: 0, seconds: 0 }), {
      hours: 1.5,
      minutes: 0,
      seconds: 0,
    });
  });

  test('ignored fields are reported for the log, and nothing else is dropped', () => {
    const { specification, ignored } = readJobSpecification({
      application: { name: 'a', version: '1', title: 'A' },
      hostname: 'h',
      labels: {},
      mystery: 1,
    });
    assert.deepEqual(ignored, ['hostname', 'labels', 'application.title']);
    assert.deepEqual(specification, { application: { name: 'a', version: '1' }, mystery: 1 });
  });
});

describe('extending jobs as UCloud clients do', () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('a requested time of 90 minutes is an hour and a half', async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const r = await send(w, 'POST', '/api/jobs/extend', {
      type: 'bulk',
      items: [{ jobId: id, requestedTime: { hours: 0, minutes: 90, seconds: 0 } }],
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const added = (await w.service.retrieve(ADMIN, id)).updates.at(-1)?.newTimeAllocation;
    assert.equal(added, (90 + 90) * 60_000, 'the 90 minutes it had, and 90 more');
  });
});
