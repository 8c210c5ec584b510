import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { type Caller, createJobService } from '../src/jobs/service.ts';
import { Job } from '../src/model/job.ts';
import { BrowseResponse, ProductSupportResponse, UtilizationResponse } from '../src/server/schemas.ts';
import { env } from './support/fixtures.ts';
import { jobInState } from './support/server.ts';
import { createFrom, fixture, send, type World, world } from './support/ucloud.ts';

/**
 * UCloud's browse, retrieve, search, suspend, unsuspend, rename, retrieveProducts and
 * retrieveUtilization, called as UCloud's web client calls them (fixtures under
 * test/fixtures/ucloud-requests), on the dry backend with jobs that run until stopped.
 */

const ADMIN: Caller = { username: 'root', admin: true };

const query = (q: Record<string, string>) => new URLSearchParams(q).toString();
const substitute = (value: unknown, id: string): unknown =>
  JSON.parse(JSON.stringify(value).replaceAll('$JOB', id));

function assertSchema(schema: Parameters<typeof Value.Check>[0], value: unknown, what: string): void {
  const errors = [...Value.Errors(schema, value)].map((e) => `${e.path}: ${e.message}`);
  assert.deepEqual(errors, [], what);
}

describe("UCloud's browse, retrieve and search", () => {
  let w: World;
  const ids: string[] = [];
  before(async () => {
    w = await world();
    for (let i = 0; i < 3; i++) ids.push(await createFrom(w, 'create-minimal'));
    ids.push(await createFrom(w, 'create-web-client'));
    for (const id of ids) await jobInState(w, id, 'RUNNING');
    await w.service.terminate(ADMIN, [ids[0]!]);
  });
  after(() => w.close());

  test("the web client's browse: its flags honoured, a PageV2 of full jobs, oldest first", async () => {
    const r = await send(w, 'GET', `/api/jobs/browse?${query(fixture('browse-web-client').query)}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(BrowseResponse, r.body, 'the page');
    const items = r.body.items as Job[];
    assert.deepEqual(
      items.map((j) => j.id),
      ids.slice(1),
      'RUNNING only, ascending',
    );
    assert.equal(r.body.itemsPerPage, 250);
    for (const job of items) {
      assert.equal(job.specification.product.provider, 'ucompute');
      assert.equal(job.specification.replicas, 1);
      assert.ok(job.specification.parameters);
      assert.deepEqual(job.permissions, { myself: ['READ', 'EDIT', 'ADMIN'], others: [] });
      assert.equal(job.status.resolvedProduct?.id, 'u1-standard-1', 'includeProduct');
      assert.equal(job.status.resolvedApplication, undefined, 'not asked for');
      assert.equal(job.status.jobParametersJson?.request.application.name, 'word-count');
      assert.equal(job.status.jobParametersJson?.machineType.cpu, 1);
    }
  });

  test('filters narrow the page; nobody sees what is not theirs', async () => {
    const byBob = await send(w, 'GET', '/api/jobs/browse?filterCreatedBy=alice', undefined, w.bobToken);
    assert.deepEqual(byBob.body.items, []);
    const vms = await send(w, 'GET', '/api/jobs/browse?filterType=VMS_ONLY');
    assert.deepEqual(vms.body.items, [], 'ucompute runs no virtual machines');
    const elsewhere = await send(w, 'GET', '/api/jobs/browse?filterProvider=another');
    assert.deepEqual(elsewhere.body.items, []);
    const two = await send(w, 'GET', `/api/jobs/browse?filterIds=${ids[1]},${ids[3]}`);
    assert.deepEqual(
      (two.body.items as Job[]).map((j) => j.id),
      [ids[3], ids[1]],
    );
    const product = await send(w, 'GET', '/api/jobs/browse?filterProductId=u1-standard-2');
    assert.deepEqual(product.body.items, []);
  });

  test('itemsPerPage is clamped as UCloud does, not refused', async () => {
    for (const [asked, got] of [
      ['0', 50],
      ['-3', 50],
      ['5000', 1000],
      ['1', 1],
    ] as const) {
      const r = await send(w, 'GET', `/api/jobs/browse?itemsPerPage=${asked}`);
      assert.equal(r.status, 200, asked);
      assert.equal(r.body.itemsPerPage, got, asked);
    }
    // Pages of one walk every job once, in both directions.
    for (const direction of ['descending', 'ascending']) {
      const seen: string[] = [];
      let next: string | null = null;
      for (let i = 0; i < 10; i++) {
        const page = await send(
          w,
          'GET',
          `/api/jobs/browse?itemsPerPage=1&sortDirection=${direction}${next ? `&next=${next}` : ''}`,
        );
        seen.push(...(page.body.items as Job[]).map((j) => j.id));
        next = page.body.next as string | null;
        if (next === null) break;
      }
      const expected = direction === 'ascending' ? ids : [...ids].reverse();
      assert.deepEqual(seen, expected, direction);
    }
  });

  test("the job view's retrieve embeds the application, product and support", async () => {
    const flags = query(fixture('retrieve-view').query);
    const r = await send(w, 'GET', `/api/jobs/retrieve?id=${ids[3]}&${flags}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(Job, r.body, 'the job');
    const job = r.body as unknown as Job;
    // UCloud's job view reads the tool's backend from here.
    assert.equal(job.status.resolvedApplication?.invocation.tool.tool.name, 'debian');
    assert.equal(job.status.resolvedApplication?.metadata.name, 'word-count');
    assert.equal(job.status.resolvedProduct?.id, 'u1-standard-1');
    assert.equal(job.status.resolvedSupport?.support.docker.enabled, true);
    assert.equal(job.status.resolvedSupport?.support.virtualMachine.suspension, false);
    const plain = await send(w, 'GET', `/api/jobs/retrieve?id=${ids[3]}`);
    assert.equal((plain.body as unknown as Job).status.resolvedApplication, undefined);
    assert.ok((plain.body as unknown as Job).status.jobParametersJson, 'always there');
  });

  test("the web client's search finds jobs by name, with its page flags inside `flags`", async () => {
    const r = await send(w, 'POST', '/api/jobs/search', fixture('search-web-client').request);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(BrowseResponse, r.body, 'the page');
    assert.deepEqual(
      (r.body.items as Job[]).map((j) => j.id),
      [ids[3]],
    );
    const byId = await send(w, 'POST', '/api/jobs/search', { query: ids[2] });
    assert.deepEqual(
      (byId.body.items as Job[]).map((j) => j.id),
      [ids[2]],
    );
    const bob = await send(w, 'POST', '/api/jobs/search', { query: 'word' }, w.bobToken);
    assert.deepEqual(bob.body.items, []);
  });
});

describe("UCloud's suspend, unsuspend, rename, retrieveProducts and retrieveUtilization", () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('suspend frees the job from the backend and keeps it; unsuspend runs the same job again', async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const folder = (await w.service.retrieve(ADMIN, id)).output.outputFolder;
    const calls = substitute(fixture('suspend-unsuspend-rename'), id) as Record<string, object>;

    const suspended = await send(w, 'POST', '/api/jobs/suspend', calls.suspend);
    assert.equal(suspended.status, 200, JSON.stringify(suspended.body));
    assert.deepEqual(suspended.body, { responses: [{}] });
    assert.equal((await w.service.retrieve(ADMIN, id)).status.state, 'SUSPENDED');
    assert.equal((await w.store.jobs.get(id))?.submitted, false, 'the backend no longer has it');

    const again = await send(w, 'POST', '/api/jobs/suspend', calls.suspend);
    assert.equal(again.status, 409);
    assert.equal(again.body.errorCode, 'CONFLICT');

    const resumed = await send(w, 'POST', '/api/jobs/unsuspend', calls.unsuspend);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    await jobInState(w, id, 'RUNNING');
    const job = await w.service.retrieve(ADMIN, id);
    assert.equal(job.output.outputFolder, folder, 'the same folder');
    assert.deepEqual(
      job.updates.flatMap((u) => u.state ?? []),
      ['IN_QUEUE', 'RUNNING', 'SUSPENDED', 'IN_QUEUE', 'RUNNING'],
    );
    const notSuspended = await send(w, 'POST', '/api/jobs/unsuspend', calls.unsuspend);
    assert.equal(notSuspended.status, 409);
  });

  test('a suspended job stays suspended across a restart, and resumes after it', async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    await w.service.suspend(ADMIN, [id]);
    // A restart: a new service and backend over the same store.
    const dry = dryBackend({ runForMs: null });
    const submitted: string[] = [];
    const backend = {
      ...dry,
      submit: (jobId: string, build: Parameters<typeof dry.submit>[1]) => {
        submitted.push(jobId);
        return dry.submit(jobId, build);
      },
    };
    const service = createJobService({ store: w.store, env: env(), backend });
    try {
      await service.start();
      // Recovery queued the suspended job first: once a job created after it is submitted, the
      // queue has passed the suspended one (which, built already, would have been submitted first).
      const { application, product, parameters } = fixture('create-minimal').request.items[0];
      const alice = { username: 'alice', admin: false };
      const [later] = await service.create(alice, [{ application, product, parameters }]);
      await jobInState({ service }, later!, 'RUNNING');
      assert.equal((await service.retrieve(ADMIN, id)).status.state, 'SUSPENDED', 'not lost, not started');
      assert.deepEqual(submitted, [later], 'recovery does not even start it');
      await service.unsuspend(ADMIN, [id]);
      await jobInState({ service }, id, 'RUNNING');
      assert.deepEqual(submitted, [later, id]);
      await service.terminate(ADMIN, [later!]);
    } finally {
      await service.stop();
      await backend.close();
    }
  });

  test('a job suspended while queued is never submitted until unsuspended', async () => {
    const id = await createFrom(w, 'create-web-client');
    await w.service.suspend(ADMIN, [id]);
    // Submissions start in the order jobs are queued: one queued after it has been submitted.
    const later = await createFrom(w, 'create-web-client');
    await jobInState(w, later, 'RUNNING');
    assert.equal((await w.service.retrieve(ADMIN, id)).status.state, 'SUSPENDED');
    assert.equal((await w.store.jobs.get(id))?.submitted, false);
    await w.service.terminate(ADMIN, [later]);
    await w.service.unsuspend(ADMIN, [id]);
    await jobInState(w, id, 'RUNNING');
  });

  test("others' jobs cannot be suspended, resumed or renamed: 404, and nothing changes", async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const calls = substitute(fixture('suspend-unsuspend-rename'), id) as Record<string, object>;
    for (const call of ['suspend', 'unsuspend', 'rename'] as const) {
      const r = await send(w, 'POST', `/api/jobs/${call}`, calls[call], w.bobToken);
      assert.equal(r.status, 404, call);
    }
    const job = await w.service.retrieve(ADMIN, id);
    assert.equal(job.status.state, 'RUNNING');
    assert.equal(job.specification.name, 'Counting words');
    const utilization = await send(
      w,
      'GET',
      `/api/jobs/retrieveUtilization?jobId=${id}`,
      undefined,
      w.bobToken,
    );
    assert.equal(utilization.status, 404);
  });

  test('rename gives a new name, an empty title none; a bad one is refused naming the field', async () => {
    const id = await createFrom(w, 'create-web-client');
    const calls = substitute(fixture('suspend-unsuspend-rename'), id) as Record<string, object>;
    const r = await send(w, 'POST', '/api/jobs/rename', calls.rename);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await w.service.retrieve(ADMIN, id)).specification.name, 'Renamed (again)');
    const bad = await send(w, 'POST', '/api/jobs/rename', { items: [{ id, newTitle: 'a/b' }] });
    assert.equal(bad.status, 400);
    assert.match(bad.body.why as string, /items\[0\]\.newTitle/);
    assert.equal((await w.service.retrieve(ADMIN, id)).specification.name, 'Renamed (again)');
    await send(w, 'POST', '/api/jobs/rename', { items: [{ id, newTitle: '' }] });
    assert.equal((await w.service.retrieve(ADMIN, id)).specification.name, undefined);
  });

  test('retrieveProducts answers every product with its support; retrieveUtilization the backend and queue', async () => {
    const products = await send(w, 'GET', '/api/jobs/retrieveProducts');
    assert.equal(products.status, 200, JSON.stringify(products.body));
    assertSchema(ProductSupportResponse, products.body, 'the products');
    const ours = (products.body.productsByProvider as Record<string, { product: { name: string } }[]>)
      .ucompute!;
    assert.ok(ours.some((p) => p.product.name === 'u1-standard-1'));

    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const calls = substitute(fixture('suspend-unsuspend-rename'), id) as Record<
      string,
      Record<string, string>
    >;
    const r = await send(w, 'GET', `/api/jobs/retrieveUtilization?${query(calls.utilization!)}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(UtilizationResponse, r.body, 'the utilization');
    const running = (await w.store.jobs.running(undefined, 100)).length;
    assert.deepEqual(r.body.queueStatus, { running, pending: 0 });
    assert.deepEqual(r.body.usedCapacity, { cpu: running, memory: running * 2 * 2 ** 30 });
    assert.ok((r.body.capacity as { cpu: number }).cpu > 0);
  });
});
