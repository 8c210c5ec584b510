import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { followAsCore, getAt } from './support/core-sessions.ts';
import { ucloudApplication } from './support/fake-ucloud-core.ts';
import { catalog } from './support/fixtures.ts';
import { callProvider, PROVIDER_ID, type ProviderWorld, providerWorld } from './support/provider.ts';
import { until } from './support/until.ts';

const app = (name: string) => ucloudApplication(catalog.find(name, '1.0')!);
const spec = (name: string, extra: Record<string, unknown> = {}) => ({
  application: { name, version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard', provider: PROVIDER_ID },
  timeAllocation: { hours: 1, minutes: 0, seconds: 0 },
  ...extra,
});
const states = (w: ProviderWorld, id: string) =>
  w.core.updatesOf(id).flatMap((u) => (typeof u.state === 'string' ? [u.state] : []));

let w: ProviderWorld;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute as a UCloud provider', () => {
  before(async () => {
    w = await providerWorld();
  });
  after(() => w.close());

  test('ucompute registers its products with Core as ProductV2 and refreshes its access token', async () => {
    const products = await until(() => w.core.state.products.length > 0 && w.core.state.products, {
      describe: 'products registered',
    });
    const first = products[0] as {
      name: string;
      category: { name: string; provider: string };
      productType: string;
    };
    assert.equal(first.productType, 'COMPUTE');
    assert.equal(first.category.provider, PROVIDER_ID);
    assert.ok(w.core.state.refreshes >= 1);
  });

  test('Core creates, extends, suspends, resumes and terminates a job; every change reaches Core in order', async () => {
    const job = w.core.job('1001', app('terminal'), spec('terminal'));
    const created = await callProvider(w, '', { items: [job] });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.deepEqual(created.body, { responses: [null] });
    await until(() => states(w, '1001').includes('RUNNING'), { describe: 'RUNNING at Core' });
    assert.equal((await w.store.jobs.get('1001'))?.createdBy, 'alice#1234');

    assert.equal(
      (
        await callProvider(w, '/extend', {
          items: [{ job, requestedTime: { hours: 1, minutes: 0, seconds: 0 } }],
        })
      ).status,
      200,
    );
    await until(() => w.core.updatesOf('1001').some((x) => x.newTimeAllocation === 2 * 3_600_000), {
      describe: 'newTimeAllocation at Core',
    });
    assert.equal((await callProvider(w, '/suspend', { items: [{ job }] })).status, 200);
    await until(() => states(w, '1001').at(-1) === 'SUSPENDED', { describe: 'SUSPENDED at Core' });
    assert.equal((await callProvider(w, '/unsuspend', { items: [{ job }] })).status, 200);
    await until(() => states(w, '1001').at(-1) === 'RUNNING', { describe: 'RUNNING again' });
    assert.equal((await callProvider(w, '/terminate', { items: [job] })).status, 200);
    await until(() => states(w, '1001').at(-1) === 'SUCCESS', { describe: 'SUCCESS at Core' });
    // Terminating an ended job changes nothing and answers 200, as core2 does.
    assert.equal((await callProvider(w, '/terminate', { items: [job] })).status, 200);

    const ours = (await w.service.retrieve({ username: 'admin', admin: true }, '1001')).updates.slice(1);
    assert.deepEqual(
      w.core.updatesOf('1001').map((u) => [u.state, u.status]),
      ours.map((u) => [u.state, u.status]),
    );
  });

  test('refused: a forged token, an expired one, one for another provider, another role, none; nothing changes', async () => {
    const job = w.core.job('1002', app('terminal'), spec('terminal'));
    for (const token of [
      await w.core.token({ otherProvider: true }),
      await w.core.token({ expired: true }),
      await w.core.token({ role: 'USER' }),
      await w.core.token({ subject: 'alice' }),
      'not-a-jwt',
    ]) {
      const r = await callProvider(w, '', { items: [job] }, token);
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.equal(typeof r.body.why, 'string');
    }
    const bare = await fetch(`${w.url}/ucloud/${PROVIDER_ID}/jobs`, { method: 'POST', body: '{}' });
    assert.equal(bare.status, 401);
    assert.equal(await w.store.jobs.get('1002'), undefined);
  });

  test('a job ucompute cannot run is refused by name: a virtual machine tool, a private network', async () => {
    const vm = w.core.job(
      '1003',
      ucloudApplication(catalog.find('word-count', '1.0')!, 'VIRTUAL_MACHINE'),
      spec('word-count'),
    );
    const r = await callProvider(w, '', { items: [vm] });
    assert.equal(r.status, 400);
    assert.match(String(r.body.why), /VIRTUAL_MACHINE: ucompute runs containers, not virtual machines/);
    const net = w.core.job(
      '1004',
      app('word-count'),
      spec('word-count', { resources: [{ type: 'private_network', id: 'n1' }] }),
    );
    const r2 = await callProvider(w, '', { items: [net] });
    assert.equal(r2.status, 400);
    assert.match(String(r2.body.why), /private_network: private networks are not offered/);
    assert.equal(await w.store.jobs.get('1003'), undefined);
    assert.equal(await w.store.jobs.get('1004'), undefined);
  });

  test('a Jinja invocation that does not render: alone, a 400 naming it; in a bulk, that job FAILURE at Core, the others run', async () => {
    const v2 = buildCatalog([
      {
        path: 'shell.yml',
        text: [
          'application: v2',
          'name: shell',
          'version: "1"',
          'software: { type: Container, image: ubuntu }',
          'parameters:',
          '  web: { type: Boolean, title: Web, optional: true }',
          'invocation: |',
          '  {% if web %}{{ dynamicInterface(0, "WEB", "extra", 8080) }}{% endif %}',
          '  sleep infinity',
          '',
        ].join('\n'),
      },
    ]).catalog.find('shell', '1')!;
    const shell = (id: string, web: boolean) =>
      w.core.job(id, ucloudApplication(v2), {
        ...spec('shell'),
        application: { name: 'shell', version: '1' },
        parameters: { web: { type: 'boolean', value: web } },
      });
    const alone = await callProvider(w, '', { items: [shell('1011', true)] });
    assert.equal(alone.status, 400);
    assert.match(
      String(alone.body.why),
      /^items\[0\]\.specification\.application: shell's invocation does not render for this job: .*dynamicInterface/,
    );
    assert.equal(await w.store.jobs.get('1011'), undefined);

    const bulk = await callProvider(w, '', { items: [shell('1012', false), shell('1013', true)] });
    assert.equal(bulk.status, 200, JSON.stringify(bulk.body));
    assert.deepEqual(bulk.body, { responses: [null, null] });
    await until(() => states(w, '1012').includes('RUNNING'), { describe: '1012 RUNNING at Core' });
    await until(() => states(w, '1013').includes('FAILURE'), { describe: '1013 FAILURE at Core' });
    assert.equal(await w.store.jobs.get('1013'), undefined);
    assert.match(
      String(w.core.updatesOf('1013')[0]?.status),
      /^ucompute cannot run this job: items\[1\]\.specification\.application: shell's invocation does not render/,
    );
    assert.equal((await callProvider(w, '/terminate', { items: [shell('1012', false)] })).status, 200);
  });

  test("a Core job that asks for no time gets the tool's default within the maximum, as a job that asks for none here", async () => {
    const { timeAllocation: _none, ...untimed } = spec('terminal');
    const created = await callProvider(w, '', { items: [w.core.job('1014', app('terminal'), untimed)] });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const tool = catalog.find('terminal', '1.0')!.tool.defaultTimeAllocation;
    const byDefault = tool ? ((tool.hours * 60 + tool.minutes) * 60 + tool.seconds) * 1000 : undefined;
    assert.equal(
      (await w.store.jobs.get('1014'))?.timeAllocationMs,
      Math.min(byDefault ?? Infinity, 168 * 3_600_000),
    );
    assert.equal(
      (await callProvider(w, '/terminate', { items: [w.core.job('1014', app('terminal'), untimed)] })).status,
      200,
    );
  });

  test('creates that arrive together are all stored before they are answered, and run', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `${1100 + i}`);
    const answers = await Promise.all(
      ids.map((id) => callProvider(w, '', { items: [w.core.job(id, app('terminal'), spec('terminal'))] })),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      ids.map(() => 200),
    );
    for (const id of ids) assert.equal((await w.store.jobs.get(id))?.id, id);
    await until(() => ids.every((id) => states(w, id).includes('RUNNING')), {
      describe: 'all RUNNING at Core',
    });
    const jobs = ids.map((id) => w.core.job(id, app('terminal'), spec('terminal')));
    assert.equal((await callProvider(w, '/terminate', { items: jobs })).status, 200);
  });

  test("Core's Workflow value: the user's script and its inputs run; a script that does not render is a 400", async () => {
    const generic = buildCatalog([
      {
        path: 'generic.yml',
        text: [
          'application: v2',
          'name: generic',
          'version: "1"',
          'software: { type: Container, image: ubuntu }',
          'parameters:',
          '  wf: { type: Workflow, title: Workflow, optional: false, job: "sleep inf" }',
          'invocation: ""',
          '',
        ].join('\n'),
      },
    ]).catalog.find('generic', '1')!;
    const withScript = (id: string, job: string) =>
      w.core.job(id, ucloudApplication(generic), {
        ...spec('generic'),
        application: { name: 'generic', version: '1' },
        parameters: {
          wf: {
            type: 'workflow',
            specification: {
              applicationName: 'generic',
              language: 'jinja2',
              init: null,
              job,
              readme: null,
              inputs: [{ name: 'n', type: 'integer', title: 'N', optional: false, defaultValue: null }],
            },
          },
          n: { type: 'integer', value: 3 },
        },
      });
    const ok = await callProvider(w, '', {
      items: [withScript('1021', 'for i in {{ range(n) | join(" ") }}; do echo $i; done')],
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    await until(() => states(w, '1021').includes('RUNNING'), { describe: '1021 RUNNING at Core' });
    const broken = await callProvider(w, '', { items: [withScript('1022', '{% if %}')] });
    assert.equal(broken.status, 400);
    assert.match(
      String(broken.body.why),
      /^items\[0\]\.specification\.application: generic's invocation does not render/,
    );
    assert.equal(await w.store.jobs.get('1022'), undefined);
    assert.equal((await callProvider(w, '/terminate', { items: [withScript('1021', '')] })).status, 200);
  });

  test('the end-user API is off; the admin still reads', async () => {
    const r = await w.app.inject({ method: 'POST', url: '/api/jobs', payload: { items: [] } });
    assert.equal(r.statusCode, 401);
  });

  test('retrieveProducts answers ComputeSupport per product', async () => {
    const r = await callProvider(w, '/retrieveProducts');
    assert.equal(r.status, 200);
    const first = (r.body.responses as { product: { provider: string }; docker: { enabled: boolean } }[])[0]!;
    assert.equal(first.product.provider, PROVIDER_ID);
    assert.equal(first.docker.enabled, true);
  });

  test('sessions: a web link on the job origin sets the cookie once, a replay is refused; a shell identifier', async () => {
    const job = w.core.job('1005', app('file-server'), spec('file-server'));
    assert.equal((await callProvider(w, '', { items: [job] })).status, 200);
    await until(async () => (await w.store.jobs.get('1005'))?.state === 'RUNNING', { describe: 'RUNNING' });
    const opened = await callProvider(w, '/interactiveSession', {
      items: [
        { job, rank: 0, sessionType: 'WEB', target: null },
        { job, rank: 0, sessionType: 'SHELL' },
      ],
    });
    assert.equal(opened.status, 200, JSON.stringify(opened.body));
    const [web, shell] = opened.body.responses as Record<string, string>[];
    assert.equal(web!.type, 'web');
    const link = new URL(web!.redirectClientTo!);
    assert.equal(link.pathname, `/ucloud/${PROVIDER_ID}/authorize-app`);
    assert.match(link.hostname, /^app-1005-0\./);
    // Through the server itself: the web proxy answers for the job's origin, not the API.
    const first = await getAt(w, link.host, link.pathname + link.search);
    assert.equal(first.status, 303);
    assert.match(first.cookie, /ucompute-session=/);
    assert.equal((await getAt(w, link.host, link.pathname + link.search)).status, 403);
    assert.equal(shell!.type, 'shell');
    assert.equal(typeof shell!.sessionIdentifier, 'string');
    await callProvider(w, '/terminate', { items: [job] });
  });

  test('follow: Core follows a job over its WebSocket until the job ends', async () => {
    const job = w.core.job('1006', app('terminal'), spec('terminal'));
    assert.equal((await callProvider(w, '', { items: [job] })).status, 200);
    const follow = await followAsCore(w, job);
    await callProvider(w, '/terminate', { items: [job] });
    await until(() => follow.response(), { describe: 'the final response' });
    assert.deepEqual(follow.response(), { type: 'response', status: 200, streamId: 'ignored', payload: {} });
    follow.close();
    const refused = new WebSocket(
      `${w.url.replace('http', 'ws')}/ucloud/jobs.provider.${PROVIDER_ID}/websocket`,
    );
    const status = await new Promise<number>((done) =>
      refused.once('unexpected-response', (_q, r) => done(r.statusCode ?? 0)),
    );
    assert.equal(status, 401);
  });

  test('Core down while jobs change state: afterwards every update arrives, in order, once', async () => {
    w.core.state.down = true;
    const jobs = ['2001', '2002', '2003'].map((id) => w.core.job(id, app('terminal'), spec('terminal')));
    assert.equal((await callProvider(w, '', { items: jobs })).status, 200);
    for (const id of ['2001', '2002', '2003']) {
      await until(async () => (await w.store.jobs.get(id))?.state === 'RUNNING', {
        describe: `${id} RUNNING here`,
      });
    }
    assert.equal((await callProvider(w, '/terminate', { items: jobs.slice(0, 2) })).status, 200);
    await until(() => w.core.state.refused >= 3, { describe: 'refused calls' });
    assert.equal(states(w, '2001').length, 0);
    w.core.state.down = false;
    for (const id of ['2001', '2002']) {
      await until(() => states(w, id).at(-1) === 'SUCCESS', { describe: `${id} at Core` });
    }
    for (const id of ['2001', '2002', '2003']) {
      const ours = (await w.service.retrieve({ username: 'admin', admin: true }, id)).updates.slice(1);
      await until(() => w.core.updatesOf(id).length >= ours.length, { describe: `all of ${id}` });
      assert.deepEqual(
        w.core.updatesOf(id).map((u) => [u.state, u.status, u.timestamp]),
        ours.map((u) => [u.state, u.status, u.timestamp]),
      );
    }
    await until(async () => (await w.provider.outbox.size()) === 0, { describe: 'an empty outbox' });
    await callProvider(w, '/terminate', { items: [jobs[2]] });
  });
});
