import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { InjectOptions } from 'fastify';
import WebSocket from 'ws';
import type { Caller } from '../src/jobs/service.ts';
import type { Job } from '../src/model/job.ts';
import type { FollowMessage } from '../src/server/schemas.ts';
import { jobInState, type TestServer, testServer } from './support/server.ts';
import { jobCount, openTestStore, userWithCredits } from './support/store.ts';

/**
 * The HTTP API end to end through `app.inject()` (and a real loopback port for WebSockets), over
 * an in-memory store and the dry backend with jobs that keep running until terminated.
 */

const YEAR = 365 * 24 * 3600 * 1000;
const ADMIN: Caller = { username: 'root', admin: true };

type Who = 'alice' | 'bob' | 'carol' | 'admin';

interface World extends TestServer {
  tokens: Record<Who, string>;
}

/**
 * alice has credits for u1-standard and leads project `climate` (PI); bob has no credits of his
 * own and is a USER member of `climate`, which has credits; carol is an ADMIN member; `secret`
 * has no members. `root` is an administrator.
 */
async function world(): Promise<World> {
  const store = await openTestStore();
  const now = Date.now();
  const aliceToken = await userWithCredits(store, 'alice');
  for (const name of ['bob', 'carol']) await store.users.createUser(name, false);
  await store.users.createUser('root', true);
  await store.users.createProject('climate', 'Climate');
  await store.users.createProject('secret', 'Secret');
  await store.users.setMember('climate', 'alice', 'PI');
  await store.users.setMember('climate', 'bob', 'USER');
  await store.users.setMember('climate', 'carol', 'ADMIN');
  await store.accounting.grant('project:climate', 'u1-standard', 1_000_000, now - 1000, now + YEAR);
  const tokens = {
    alice: aliceToken,
    bob: await store.users.createToken('bob', 'test'),
    carol: await store.users.createToken('carol', 'test'),
    admin: await store.users.createToken('root', 'test'),
  };
  return { ...(await testServer(store)), tokens };
}

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
/** word-count over a file in `drive` (a user's home, or /projects/<id> for project jobs). */
const wordCount = (drive = '/home/alice', extra: Record<string, unknown> = {}) => ({
  application: { name: 'word-count', version: '1.0' },
  product: STANDARD_1,
  parameters: { input: { type: 'file', path: `${drive}/books/moby-dick.txt`, readOnly: true } },
  ...extra,
});
const mpi = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  ...extra,
});
const hours = (h: number) => ({ hours: h, minutes: 0, seconds: 0 });

interface Call {
  method?: 'GET' | 'POST';
  url: string;
  as?: Who | 'nobody' | 'bad-token' | 'malformed';
  body?: unknown;
  headers?: Record<string, string>;
}

function call(w: World, c: Call) {
  const headers: Record<string, string> = { ...c.headers };
  if (c.as === 'bad-token') headers.authorization = 'Bearer uc_not-a-token';
  else if (c.as === 'malformed') headers.authorization = `Basic ${w.tokens.alice}`;
  else if (c.as !== 'nobody') headers.authorization = `Bearer ${w.tokens[c.as ?? 'alice']}`;
  const options: InjectOptions = {
    method: c.method ?? (c.body === undefined ? 'GET' : 'POST'),
    url: c.url,
    headers,
  };
  if (c.body !== undefined) options.payload = c.body as InjectOptions['payload'];
  return w.app.inject(options);
}

async function ok<T>(w: World, c: Call): Promise<T> {
  const response = await call(w, c);
  assert.equal(response.statusCode, 200, `${c.url}: ${response.body}`);
  return response.json() as T;
}

async function create(w: World, items: unknown[], as: Who = 'alice', headers: Record<string, string> = {}) {
  const body = await ok<{ responses: { id: string }[] }>(w, {
    url: '/api/jobs',
    as,
    body: { items },
    headers,
  });
  return body.responses.map((r) => r.id);
}

// ---- every error path ----------------------------------------------------------------------------

interface ErrorCase extends Call {
  name: string;
  status: number;
  message?: RegExp;
  /** A path the response's issues must name (400s). */
  issue?: string;
}

describe('API error paths', () => {
  let w: World;
  const ids = { running: '', ended: '', unlimited: '' };

  before(async () => {
    w = await world();
    const [running, ended, unlimited] = await create(w, [
      wordCount(),
      wordCount(),
      wordCount('/home/alice', { timeAllocation: null }),
    ]);
    Object.assign(ids, { running, ended, unlimited });
    await jobInState(w, ids.running, 'RUNNING');
    await jobInState(w, ids.unlimited, 'RUNNING');
    await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id: ids.ended }] } });
    await create(w, [wordCount()], 'alice', { 'idempotency-key': 'used-once' });
  });
  after(() => w.close());

  const cases = (): ErrorCase[] => [
    // 401: no token, a bad one, a malformed header; checked before the body is even read.
    { name: 'no token', url: '/api/jobs/browse', as: 'nobody', status: 401, message: /needs an API token/ },
    { name: 'bad token', url: '/api/jobs/browse', as: 'bad-token', status: 401, message: /not valid/ },
    {
      name: 'not a Bearer header',
      url: '/api/jobs/browse',
      as: 'malformed',
      status: 401,
      message: /not valid/,
    },
    { name: 'no token, bad body', url: '/api/jobs', as: 'nobody', body: { nonsense: 1 }, status: 401 },
    { name: 'no token on admin', url: '/api/admin/users', as: 'nobody', body: { name: 'x' }, status: 401 },
    { name: 'no token on follow', url: `/api/jobs/follow?id=${ids.running}`, as: 'nobody', status: 401 },
    { name: 'no token on apps', url: '/api/apps', as: 'nobody', status: 401 },
    { name: 'no token on wallets', url: '/api/accounting/wallets', as: 'nobody', status: 401 },

    // 403: administrators' calls, and projects one is not in.
    ...[
      ['/api/admin/users', { name: 'mallory' }],
      ['/api/admin/projects', { id: 'mine', title: 'Mine' }],
      ['/api/admin/projects/members', { projectId: 'secret', username: 'alice', role: 'PI' }],
      ['/api/admin/tokens', { username: 'bob', description: 'steal' }],
      ['/api/accounting/allocations', { owner: 'user:alice', category: 'u1-standard', credits: 1e9 }],
    ].map(([url, body]) => ({
      name: `non-admin on ${url}`,
      url: url as string,
      body,
      status: 403,
      message: /administrators only/,
    })),
    {
      name: 'a project one is not in',
      url: '/api/jobs',
      body: { items: [wordCount()] },
      headers: { project: 'secret' },
      status: 403,
      message: /not a member of project secret/,
    },
    {
      name: 'a project that does not exist',
      url: '/api/jobs',
      as: 'bob',
      body: { items: [wordCount('/home/bob')] },
      headers: { project: 'nowhere' },
      status: 403,
    },

    // 404: others' jobs look exactly like jobs that do not exist.
    { name: "retrieve another's job", url: `/api/jobs/retrieve?id=${ids.running}`, as: 'bob', status: 404 },
    { name: 'retrieve an unknown job', url: '/api/jobs/retrieve?id=nosuchjob', status: 404 },
    {
      name: "terminate another's job",
      url: '/api/jobs/terminate',
      as: 'bob',
      body: { items: [{ id: ids.running }] },
      status: 404,
    },
    {
      name: "extend another's job",
      url: '/api/jobs/extend',
      as: 'bob',
      body: { items: [{ jobId: ids.running, requestedTime: hours(1) }] },
      status: 404,
    },
    { name: "follow another's job", url: `/api/jobs/follow?id=${ids.running}`, as: 'bob', status: 404 },
    { name: 'an unknown application', url: '/api/apps/retrieve?name=nope', status: 404, message: /nope/ },
    {
      name: 'an unknown application version',
      url: '/api/apps/retrieve?name=word-count&version=9.9',
      status: 404,
    },
    {
      name: 'member of an unknown project',
      url: '/api/admin/projects/members',
      as: 'admin',
      body: { projectId: 'nowhere', username: 'alice', role: 'USER' },
      status: 404,
    },
    {
      name: 'token for an unknown user',
      url: '/api/admin/tokens',
      as: 'admin',
      body: { username: 'ghost', description: '' },
      status: 404,
    },
    {
      name: 'credits for an unknown owner',
      url: '/api/accounting/allocations',
      as: 'admin',
      body: { owner: 'project:nowhere', category: 'u1-standard', credits: 10 },
      status: 404,
    },
    { name: 'an unknown route', url: '/api/nothing', status: 404 },
    { name: 'an unknown route without a token', url: '/api/nothing', as: 'nobody', status: 404 },
    { name: 'a known route, wrong method', method: 'POST', url: '/api/jobs/browse', body: {}, status: 404 },

    // 400: the message names the field.
    { name: 'body is a list', url: '/api/jobs', body: [], status: 400, issue: 'body' },
    { name: 'items missing', url: '/api/jobs', body: {}, status: 400, issue: 'items' },
    { name: 'items empty', url: '/api/jobs', body: { items: [] }, status: 400, issue: 'items' },
    {
      name: 'unknown top-level field',
      url: '/api/jobs',
      body: { items: [wordCount()], extra: 1 },
      status: 400,
      issue: 'extra',
    },
    {
      name: 'unknown field in an item',
      url: '/api/jobs',
      body: { items: [{ ...wordCount(), colour: 'blue' }] },
      status: 400,
      issue: 'items[0].colour',
    },
    {
      name: 'bad product id',
      url: '/api/jobs',
      body: { items: [wordCount('/home/alice', { product: { id: 'no such', category: 'u1-standard' } })] },
      status: 400,
      issue: 'items[0].product.id',
    },
    {
      name: 'parameter of the wrong type',
      url: '/api/jobs',
      body: {
        items: [
          wordCount('/home/alice', {
            parameters: { ...wordCount().parameters, top: { type: 'integer', value: 'ten' } },
          }),
        ],
      },
      status: 400,
      issue: 'items[0].parameters.top.value',
    },
    {
      name: 'parameter out of range',
      url: '/api/jobs',
      body: {
        items: [
          wordCount('/home/alice', {
            parameters: { ...wordCount().parameters, top: { type: 'integer', value: 0 } },
          }),
        ],
      },
      status: 400,
      issue: 'items[0].specification.parameters.top.value',
    },
    {
      name: 'unknown parameter',
      url: '/api/jobs',
      body: {
        items: [
          wordCount('/home/alice', {
            parameters: { ...wordCount().parameters, x: { type: 'text', value: 'y' } },
          }),
        ],
      },
      status: 400,
      issue: 'items[0].specification.parameters.x',
    },
    {
      name: 'mandatory parameter missing',
      url: '/api/jobs',
      body: { items: [wordCount('/home/alice', { parameters: {} })] },
      status: 400,
      issue: 'items[0].specification.parameters.input',
    },
    {
      name: "a file in another user's drive",
      url: '/api/jobs',
      body: { items: [wordCount('/home/bob')] },
      status: 400,
      issue: 'items[0].specification.parameters.input.path',
    },
    {
      name: 'the second item of two is bad',
      url: '/api/jobs',
      body: {
        items: [wordCount(), wordCount('/home/alice', { application: { name: 'nope', version: '1' } })],
      },
      status: 400,
      issue: 'items[1].specification.application',
    },
    // itemsPerPage=0 is UCloud's default page (test/ucloud-compat-jobs.test.ts); not a number is wrong.
    {
      name: 'itemsPerPage=many',
      url: '/api/jobs/browse?itemsPerPage=many',
      status: 400,
      issue: 'itemsPerPage',
    },
    {
      name: 'unknown filterState',
      url: '/api/jobs/browse?filterState=DONE',
      status: 400,
      issue: 'filterState',
    },
    { name: 'bad next token', url: '/api/jobs/browse?next=NOT-AN-ID', status: 400, issue: 'next' },
    { name: 'unknown query parameter', url: '/api/jobs/browse?page=2', status: 400, issue: 'page' },
    { name: 'retrieve without id', url: '/api/jobs/retrieve', status: 400, issue: 'id' },
    {
      name: 'Idempotency-Key too long',
      url: '/api/jobs',
      body: { items: [wordCount()] },
      headers: { 'idempotency-key': 'k'.repeat(201) },
      status: 400,
      issue: 'idempotency-key',
    },
    {
      name: 'Project header not a project id',
      url: '/api/jobs',
      body: { items: [wordCount()] },
      headers: { project: 'Not A Project' },
      status: 400,
      issue: 'project',
    },
    {
      // 60 minutes are an hour, as UCloud reads them (test/ucloud-compat.test.ts); negative ones are wrong.
      name: 'extend by negative minutes',
      url: '/api/jobs/extend',
      body: { items: [{ jobId: ids.running, requestedTime: { hours: 1, minutes: -5, seconds: 0 } }] },
      status: 400,
      issue: 'items[0].requestedTime.minutes',
    },
    {
      name: 'extend without a time',
      url: '/api/jobs/extend',
      body: { items: [{ jobId: ids.running }] },
      status: 400,
      issue: 'items[0].requestedTime',
    },
    {
      name: 'extend by nothing',
      url: '/api/jobs/extend',
      body: { items: [{ jobId: ids.running, requestedTime: hours(0) }] },
      status: 400,
      message: /items\[0\]\.requestedTime: must be longer than zero/,
    },
    {
      name: 'extend a job without a time limit',
      url: '/api/jobs/extend',
      body: { items: [{ jobId: ids.unlimited, requestedTime: hours(1) }] },
      status: 400,
      message: /no time limit/,
    },
    {
      name: 'terminate nothing',
      url: '/api/jobs/terminate',
      body: { items: [] },
      status: 400,
      issue: 'items',
    },
    {
      name: 'terminate a malformed id',
      url: '/api/jobs/terminate',
      body: { items: [{ id: 'Not/An/Id' }] },
      status: 400,
      issue: 'items[0].id',
    },
    { name: 'usage from after to', url: '/api/accounting/usage?from=10&to=5', status: 400, issue: 'from' },
    { name: 'usage by the week', url: '/api/accounting/usage?bucket=week', status: 400, issue: 'bucket' },
    {
      name: 'a user name with spaces',
      url: '/api/admin/users',
      as: 'admin',
      body: { name: 'Bad Name' },
      status: 400,
      issue: 'name',
    },
    {
      name: 'credits for a team',
      url: '/api/accounting/allocations',
      as: 'admin',
      body: { owner: 'team:x', category: 'u1-standard', credits: 1 },
      status: 400,
      issue: 'owner',
    },
    {
      name: 'credits in an unknown category',
      url: '/api/accounting/allocations',
      as: 'admin',
      body: { owner: 'user:bob', category: 'u9-quantum', credits: 1 },
      status: 400,
      issue: 'category',
    },
    {
      name: 'credits that end before they start',
      url: '/api/accounting/allocations',
      as: 'admin',
      body: { owner: 'user:bob', category: 'u1-standard', credits: 1, start: 2000, end: 1000 },
      status: 400,
      issue: 'end',
    },
    {
      name: 'negative credits',
      url: '/api/accounting/allocations',
      as: 'admin',
      body: { owner: 'user:bob', category: 'u1-standard', credits: -5 },
      status: 400,
      issue: 'credits',
    },
    {
      name: 'not JSON',
      url: '/api/jobs',
      body: '{"items": [',
      headers: { 'content-type': 'application/json' },
      status: 400,
    },
    {
      name: 'not JSON at all',
      url: '/api/jobs',
      body: 'items',
      headers: { 'content-type': 'application/xml' },
      status: 415,
    },

    // 402: no credits, and the message says so.
    {
      name: 'a user without credits',
      url: '/api/jobs',
      as: 'bob',
      body: { items: [wordCount('/home/bob')] },
      status: 402,
      message: /user bob has no allocation for u1-standard/,
    },

    // 409: final jobs (terminate leaves them as they are), an Idempotency-Key reused for something else.
    {
      name: 'extend an ended job',
      url: '/api/jobs/extend',
      body: { items: [{ jobId: ids.ended, requestedTime: hours(1) }] },
      status: 409,
      message: /already ended/,
    },
    {
      name: 'an Idempotency-Key reused for another body',
      url: '/api/jobs',
      body: { items: [mpi()] },
      headers: { 'idempotency-key': 'used-once' },
      status: 409,
      message: /different request/,
    },
    {
      name: 'a user that exists',
      url: '/api/admin/users',
      as: 'admin',
      body: { name: 'alice' },
      status: 409,
    },
    {
      name: 'a project that exists',
      url: '/api/admin/projects',
      as: 'admin',
      body: { id: 'climate', title: 'Again' },
      status: 409,
    },
  ];

  test('every error answers with its status and a message naming the problem, and changes nothing', async () => {
    for (const c of cases()) {
      const before = await jobCount(w.store);
      const response = await call(w, c);
      assert.equal(response.statusCode, c.status, `${c.name}: ${response.statusCode} ${response.body}`);
      const body = response.json() as { message?: unknown; issues?: { path: string; message: string }[] };
      assert.equal(typeof body.message, 'string', `${c.name}: ${response.body}`);
      assert.ok(!/\bat .*\.ts:\d+/.test(response.body), `${c.name}: a stack trace leaked`);
      if (c.message) assert.match(body.message as string, c.message, c.name);
      if (c.issue !== undefined) {
        const paths = (body.issues ?? []).map((i) => i.path);
        assert.ok(paths.includes(c.issue), `${c.name}: issues ${JSON.stringify(paths)} lack ${c.issue}`);
        assert.ok((body.message as string).includes(`${c.issue}: `), `${c.name}: ${body.message}`);
      }
      if (c.status === 401) assert.equal(response.headers['www-authenticate'], 'Bearer', c.name);
      assert.equal(await jobCount(w.store), before, `${c.name}: the job count changed`);
    }
    // The running job was left alone by every refused terminate and extend.
    const job = await w.service.retrieve(ADMIN, ids.running);
    assert.equal(job.status.state, 'RUNNING');
    assert.equal(job.updates.filter((u) => u.newTimeAllocation !== undefined).length, 0);
  });

  test('a plain GET on the WebSocket route asks for an upgrade', async () => {
    const response = await call(w, { url: `/api/jobs/follow?id=${ids.running}` });
    assert.equal(response.statusCode, 426);
  });
});

// ---- what works ----------------------------------------------------------------------------------

describe('API happy paths', () => {
  test('create, retrieve, extend, terminate', async () => {
    const w = await world();
    try {
      const [id] = await create(w, [
        wordCount('/home/alice', { name: 'Counting words', timeAllocation: hours(2) }),
      ]);
      assert.ok(id);
      const created = await ok<Job>(w, { url: `/api/jobs/retrieve?id=${id}` });
      assert.equal(created.id, id);
      assert.deepEqual(created.owner, { createdBy: 'alice' });
      assert.equal(created.specification.name, 'Counting words');
      assert.equal(created.updates[0]?.state, 'IN_QUEUE');

      const running = await jobInState(w, id, 'RUNNING');
      const expiresAt = running.status.expiresAt!;
      assert.equal(expiresAt, running.status.startedAt! + 2 * 3600_000);
      const extended = await ok<{ responses: unknown[] }>(w, {
        url: '/api/jobs/extend',
        body: { items: [{ jobId: id, requestedTime: { hours: 1, minutes: 30, seconds: 0 } }] },
      });
      assert.deepEqual(extended, { responses: [{}] });
      const after = await ok<Job>(w, { url: `/api/jobs/retrieve?id=${id}` });
      assert.equal(after.status.expiresAt, expiresAt + 90 * 60_000);
      assert.equal(after.updates.at(-1)?.newTimeAllocation, 3.5 * 3600_000);

      const terminated = await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id }] } });
      assert.deepEqual(terminated, { responses: [{}] });
      const ended = await ok<Job>(w, { url: `/api/jobs/retrieve?id=${id}` });
      assert.equal(ended.status.state, 'SUCCESS');
      assert.match(ended.updates.at(-1)?.status ?? '', /cancelled/);
    } finally {
      await w.close();
    }
  });

  test('browse pages through every visible job, newest first, with filters', async () => {
    const w = await world();
    try {
      const words = await create(w, [wordCount(), wordCount(), wordCount()]);
      const mpis = await create(w, [mpi(), mpi({ replicas: 2 })]);
      const [carols] = await create(w, [wordCount('/projects/climate')], 'carol', { project: 'climate' });
      const seen: string[] = [];
      let next: string | null = null;
      for (let page = 0; page < 10; page++) {
        const query: string = next ? `&next=${next}` : '';
        const body: { items: Job[]; next: string | null } = await ok(w, {
          url: `/api/jobs/browse?itemsPerPage=2${query}`,
        });
        assert.ok(body.items.length <= 2);
        seen.push(...body.items.map((j) => j.id));
        next = body.next;
        if (next === null) break;
      }
      assert.equal(next, null, 'paging ended');
      // alice leads climate, so carol's project job is hers to see too.
      assert.equal(seen.length, 6);
      assert.equal(new Set(seen).size, seen.length, 'no job twice');
      assert.deepEqual([...seen].sort().reverse(), seen, 'newest first');
      for (const id of [...words, ...mpis]) assert.ok(seen.includes(id));

      const onlyMpi = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse?filterApplication=mpi-hello' });
      assert.deepEqual(onlyMpi.items.map((j) => j.id).sort(), [...mpis].sort());

      await Promise.all([...words, ...mpis, carols!].map((id) => jobInState(w, id, 'RUNNING')));
      await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id: words[0] }] } });
      const succeeded = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse?filterState=SUCCESS' });
      assert.deepEqual(
        succeeded.items.map((j) => j.id),
        [words[0]],
      );
      const running = await ok<{ items: Job[] }>(w, {
        url: '/api/jobs/browse?filterState=RUNNING&filterApplication=word-count',
      });
      assert.deepEqual(running.items.map((j) => j.id).sort(), [words[1], words[2], carols].sort());
    } finally {
      await w.close();
    }
  });

  test('an Idempotency-Key makes a repeat return the same ids and create nothing', async () => {
    const w = await world();
    try {
      const headers = { 'idempotency-key': 'submit-42' };
      const first = await create(w, [wordCount(), mpi()], 'alice', headers);
      const count = await jobCount(w.store);
      const again = await create(w, [wordCount(), mpi()], 'alice', headers);
      assert.deepEqual(again, first);
      assert.equal(await jobCount(w.store), count);
      // Keys belong to their user: bob's identical key is his own (and refused for credits only).
      const response = await call(w, { url: '/api/jobs', as: 'bob', body: { items: [mpi()] }, headers });
      assert.equal(response.statusCode, 402);
    } finally {
      await w.close();
    }
  });

  test("project jobs: the PI sees members' jobs, a USER member only their own", async () => {
    const w = await world();
    try {
      const [pisJob] = await create(w, [wordCount('/projects/climate')], 'alice', { project: 'climate' });
      const [bobsJob] = await create(w, [mpi()], 'bob', { project: 'climate' });
      const pis = await ok<Job>(w, { url: `/api/jobs/retrieve?id=${pisJob}` });
      assert.deepEqual(pis.owner, { createdBy: 'alice', project: 'climate' });

      // The PI (and a project ADMIN) see bob's job.
      assert.equal((await ok<Job>(w, { url: `/api/jobs/retrieve?id=${bobsJob}` })).id, bobsJob);
      assert.equal((await ok<Job>(w, { url: `/api/jobs/retrieve?id=${bobsJob}`, as: 'carol' })).id, bobsJob);
      // bob, a USER member, sees his own project job but not the PI's.
      assert.equal((await ok<Job>(w, { url: `/api/jobs/retrieve?id=${bobsJob}`, as: 'bob' })).id, bobsJob);
      const hidden = await call(w, { url: `/api/jobs/retrieve?id=${pisJob}`, as: 'bob' });
      assert.equal(hidden.statusCode, 404);
      const bobs = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse', as: 'bob' });
      assert.deepEqual(
        bobs.items.map((j) => j.id),
        [bobsJob],
      );
      const alices = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse' });
      assert.deepEqual(alices.items.map((j) => j.id).sort(), [pisJob, bobsJob].sort());
      // The PI may terminate a member's job.
      await jobInState(w, bobsJob!, 'RUNNING');
      await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id: bobsJob }] } });
    } finally {
      await w.close();
    }
  });

  test("the Project header: a member works in the project's workspace; jobs, wallets and usage follow it", async () => {
    const w = await world();
    try {
      const [own] = await create(w, [mpi()], 'alice');
      const [inProject] = await create(w, [mpi()], 'alice', { project: 'climate' });
      const workspace = { project: 'climate' };
      const listed = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse', headers: workspace });
      assert.deepEqual(
        listed.items.map((j) => j.id),
        [inProject],
      );
      const everything = await ok<{ items: Job[] }>(w, { url: '/api/jobs/browse' });
      assert.deepEqual(everything.items.map((j) => j.id).sort(), [own, inProject].sort());
      // bob, a USER member, sees what his project has left (not alice's), and spends it.
      const bobs = await ok<{ items: { owner: string; balance: number }[] }>(w, {
        url: '/api/accounting/wallets',
        as: 'bob',
        headers: workspace,
      });
      assert.deepEqual(
        bobs.items.map((x) => x.owner),
        ['project:climate'],
      );
      await create(w, [mpi()], 'bob', workspace);
      const outsider = await call(w, { url: '/api/jobs/browse', as: 'bob', headers: { project: 'secret' } });
      assert.equal(outsider.statusCode, 403);
      assert.match(outsider.body, /you are not a member of project secret/);
      // bob's own workspace has no credits: the refusal names the workspace, and where credits are.
      const refused = await call(w, { url: '/api/jobs', as: 'bob', body: { items: [mpi()] } });
      assert.equal(refused.statusCode, 402);
      assert.match(
        refused.body,
        /user bob has no allocation for u1-standard: run in a project that has credits/,
      );
    } finally {
      await w.close();
    }
  });

  test('administrators make users, projects, members, tokens and allocations', async () => {
    const w = await world();
    try {
      const as = 'admin';
      assert.deepEqual(await ok(w, { url: '/api/admin/users', as, body: { name: 'dave' } }), {
        name: 'dave',
        admin: false,
      });
      await ok(w, { url: '/api/admin/projects', as, body: { id: 'genomics', title: 'Genomics' } });
      assert.deepEqual(
        await ok(w, {
          url: '/api/admin/projects/members',
          as,
          body: { projectId: 'genomics', username: 'dave', role: 'PI' },
        }),
        { projectId: 'genomics', username: 'dave', role: 'PI' },
      );
      const { token } = await ok<{ token: string }>(w, {
        url: '/api/admin/tokens',
        as,
        body: { username: 'dave', description: 'laptop' },
      });
      const grant = await ok<{ id: number; start: number; end: number }>(w, {
        url: '/api/accounting/allocations',
        as,
        body: { owner: 'project:genomics', category: 'u1-standard', credits: 500 },
      });
      assert.equal(grant.end - grant.start, YEAR);

      const dave = { authorization: `Bearer ${token}` };
      const response = await w.app.inject({
        method: 'POST',
        url: '/api/jobs',
        headers: { ...dave, project: 'genomics' },
        payload: { items: [mpi()] },
      });
      assert.equal(response.statusCode, 200, response.body);
      const wallets = await w.app.inject({ url: '/api/accounting/wallets', headers: dave });
      assert.deepEqual(wallets.json(), {
        items: [
          { owner: 'project:genomics', category: 'u1-standard', allocated: 500, used: 0, balance: 500 },
        ],
      });
    } finally {
      await w.close();
    }
  });

  test('apps, products, wallets and usage', async () => {
    const w = await world();
    try {
      const apps = await ok<{
        items: { name: string; version: string; tags: string[]; parameters: { name: string }[] }[];
      }>(w, { url: '/api/apps' });
      const wc = apps.items.find((a) => a.name === 'word-count');
      assert.deepEqual(wc?.tags, ['text', 'batch']);
      assert.deepEqual(
        wc?.parameters.map((p) => p.name),
        ['input', 'ignoreCase', 'top'],
      );
      const app = await ok<{ application: { metadata: { version: string } }; tool: { name: string } }>(w, {
        url: '/api/apps/retrieve?name=word-count',
      });
      assert.equal(app.application.metadata.version, '1.0');
      assert.equal(app.tool.name, 'debian');
      const products = await ok<{ items: { id: string }[] }>(w, { url: '/api/products' });
      assert.ok(products.items.some((p) => p.id === 'u1-gpu-1'));

      const [id] = await create(w, [wordCount()]);
      const hour = 3600_000;
      const t0 = Date.UTC(2025, 0, 1);
      const charge = async (n: number, at: number, credits: number) =>
        await w.store.accounting.charge({
          chargeId: `${id}:${n}`,
          jobId: id!,
          owner: 'user:alice',
          category: 'u1-standard',
          units: 1,
          periods: credits,
          credits,
          chargedAt: at,
        });
      charge(0, t0 + 10, 5);
      charge(1, t0 + hour / 2, 7);
      charge(2, t0 + hour + 1, 11);
      const byHour = await ok(w, {
        url: `/api/accounting/usage?from=${t0}&to=${t0 + 24 * hour}&bucket=hour`,
      });
      assert.deepEqual(byHour, {
        from: t0,
        to: t0 + 24 * hour,
        bucket: 'hour',
        items: [
          { owner: 'user:alice', category: 'u1-standard', start: t0, credits: 12 },
          { owner: 'user:alice', category: 'u1-standard', start: t0 + hour, credits: 11 },
        ],
      });
      const byDay = await ok<{ items: unknown[] }>(w, {
        url: `/api/accounting/usage?from=${t0}&to=${t0 + 24 * hour}`,
      });
      assert.deepEqual(byDay.items, [
        { owner: 'user:alice', category: 'u1-standard', start: t0, credits: 23 },
      ]);
      // bob sees neither alice's usage nor, as a USER member, the project's.
      const bobs = await ok<{ items: unknown[] }>(w, {
        url: `/api/accounting/usage?from=${t0}&to=${t0 + 24 * hour}`,
        as: 'bob',
      });
      assert.deepEqual(bobs.items, []);
      const wallets = await ok<{ items: { owner: string }[] }>(w, { url: '/api/accounting/wallets' });
      assert.deepEqual(wallets.items.map((x) => x.owner).sort(), ['project:climate', 'user:alice']);
    } finally {
      await w.close();
    }
  });

  test('/healthz and /metrics need no token; metrics count jobs by state and submissions', async () => {
    const w = await world();
    try {
      assert.deepEqual((await call(w, { url: '/healthz', as: 'nobody' })).json(), { ok: true });
      const [id] = await create(w, [wordCount(), mpi()]);
      await jobInState(w, id!, 'RUNNING');
      const metrics = await call(w, { url: '/metrics', as: 'nobody' });
      assert.equal(metrics.statusCode, 200);
      assert.match(metrics.headers['content-type'] as string, /^text\/plain/);
      assert.match(metrics.body, /^ucompute_jobs\{state="RUNNING"\} [12]$/m);
      assert.match(metrics.body, /^ucompute_jobs\{state="FAILURE"\} 0$/m);
      assert.match(metrics.body, /^ucompute_jobs_submitted_total 2$/m);
      assert.match(
        metrics.body,
        /^ucompute_http_request_duration_seconds_count\{route="\/api\/jobs",method="POST",status="200"\} 1$/m,
      );
      assert.match(metrics.body, /^process_cpu_user_seconds_total /m);
    } finally {
      await w.close();
    }
  });

  test('/openapi.json is an OpenAPI 3 document with the job paths and valid schemas', async () => {
    const w = await world();
    try {
      const response = await call(w, { url: '/openapi.json', as: 'nobody' });
      assert.equal(response.statusCode, 200);
      const doc = response.json() as {
        openapi: string;
        info: { title: string; version: string };
        paths: Record<
          string,
          Record<string, { responses?: Record<string, unknown>; parameters?: unknown[] }>
        >;
        components?: { schemas?: Record<string, unknown> };
      };
      assert.match(doc.openapi, /^3\.\d+\.\d+$/);
      assert.equal(typeof doc.info.title, 'string');
      assert.equal(typeof doc.info.version, 'string');
      for (const path of [
        '/api/jobs',
        '/api/jobs/browse',
        '/api/jobs/retrieve',
        '/api/jobs/terminate',
        '/api/jobs/extend',
        '/api/jobs/follow',
        '/api/apps',
        '/api/products',
        '/api/accounting/wallets',
        '/api/admin/users',
      ]) {
        assert.ok(doc.paths[path], `${path} is described`);
      }
      assert.ok(doc.paths['/api/jobs']?.post?.parameters?.length, 'the create headers are described');
      const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: false });
      ajv.addVocabulary(['example', 'discriminator', 'xml', 'externalDocs']);
      for (const [path, operations] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          assert.ok(operation.responses && Object.keys(operation.responses).length > 0, `${method} ${path}`);
          for (const [code] of Object.entries(operation.responses)) {
            assert.match(code, /^([1-5](\d\d|XX)|default)$/, `${method} ${path} ${code}`);
          }
        }
      }
      // Every schema in the document compiles as JSON Schema 2020-12 (the dialect of OpenAPI 3.1);
      // one that appears again (the Job in many answers) is the same text, compiled once.
      let schemas = 0;
      const compiled = new Set<string>();
      const visit = (node: unknown, key: string): void => {
        if (typeof node !== 'object' || node === null) return;
        if (key === 'schema') {
          const text = JSON.stringify(node);
          if (!compiled.has(text)) ajv.compile(node as object);
          compiled.add(text);
          schemas++;
          return;
        }
        for (const [k, v] of Object.entries(node)) visit(v, k);
      };
      visit(doc.paths, '');
      assert.ok(schemas > 20, `${schemas} schemas checked`);
      // Every reference points inside the document.
      const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]*)"/g)].map((m) => m[1]!);
      for (const ref of refs) {
        assert.match(ref, /^#\//, ref);
        let target: unknown = doc;
        for (const key of ref.slice(2).split('/'))
          target = (target as Record<string, unknown> | undefined)?.[key];
        assert.ok(target !== undefined, `${ref} resolves`);
      }
      assert.ok(doc.paths['/api/jobs/follow']?.get?.responses?.['101'], 'the follow messages are described');
    } finally {
      await w.close();
    }
  });
});

// ---- following a job over a real WebSocket -------------------------------------------------------

interface Followed {
  ws: WebSocket;
  messages: FollowMessage[];
  /** Resolves with the first message (already received or not) that satisfies `predicate`. */
  until(predicate: (m: FollowMessage) => boolean): Promise<FollowMessage>;
  closed: Promise<{ code: number; reason: string }>;
}

function follow(url: string, options: { token?: string; protocols?: string[] }): Promise<Followed> {
  const headers = options.token ? { authorization: `Bearer ${options.token}` } : {};
  const ws = new WebSocket(url, options.protocols ?? [], { headers });
  const messages: FollowMessage[] = [];
  const waiters = new Set<() => void>();
  ws.on('message', (data) => {
    messages.push(JSON.parse(String(data)) as FollowMessage);
    for (const w of [...waiters]) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  const until = (predicate: (m: FollowMessage) => boolean) =>
    new Promise<FollowMessage>((resolve, reject) => {
      const check = () => {
        const found = messages.find(predicate);
        if (found) {
          waiters.delete(check);
          resolve(found);
        }
      };
      waiters.add(check);
      check();
      closed.then(() => {
        check();
        reject(new Error(`the socket closed first; messages: ${JSON.stringify(messages)}`));
      });
    });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages, until, closed }));
    ws.once('unexpected-response', (_request, response) => {
      reject(Object.assign(new Error(`HTTP ${response.statusCode}`), { status: response.statusCode }));
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

describe('following a job over a WebSocket', () => {
  let w: World;
  let base: string;

  before(async () => {
    w = await world();
    await w.app.listen({ port: 0, host: '127.0.0.1' });
    base = `ws://127.0.0.1:${(w.app.server.address() as AddressInfo).port}`;
  });
  after(() => w.close());

  test('streams the updates so far, the logs, every new update, and closes once the job ended', async () => {
    const [id] = await create(w, [mpi({ replicas: 2 })]);
    await jobInState(w, id!, 'RUNNING');
    const f = await follow(`${base}/api/jobs/follow?id=${id}`, { token: w.tokens.alice });
    const first = await f.until(() => true);
    assert.equal(first.newStatus?.state, 'RUNNING');
    assert.deepEqual(first.log, []);
    assert.deepEqual(first.updates.map((u) => u.state).filter(Boolean), ['IN_QUEUE', 'RUNNING']);
    // The dry backend's log: one chunk per rank.
    await f.until((m) => m.log.some((l) => l.rank === 1));
    const log = f.messages.flatMap((m) => m.log);
    assert.deepEqual(
      log.map((l) => l.rank),
      [0, 1],
    );
    assert.match(log[0]?.stdout ?? '', /dry run/);

    await ok(w, { url: '/api/jobs/extend', body: { items: [{ jobId: id, requestedTime: hours(1) }] } });
    const extended = await f.until((m) => m.updates.some((u) => u.newTimeAllocation !== undefined));
    assert.equal(extended.newStatus?.state, 'RUNNING');

    await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id }] } });
    const last = await f.until((m) => m.newStatus?.state === 'SUCCESS');
    assert.match(last.updates[0]?.status ?? '', /cancelled/);
    assert.deepEqual(await f.closed, { code: 1000, reason: 'the job has ended' });
  });

  test('a job that has already ended: everything at once, then closed', async () => {
    const [id] = await create(w, [wordCount()]);
    await jobInState(w, id!, 'RUNNING');
    await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id }] } });
    const f = await follow(`${base}/api/jobs/follow?id=${id}`, { token: w.tokens.alice });
    assert.equal((await f.closed).code, 1000);
    assert.equal(f.messages[0]?.newStatus?.state, 'SUCCESS');
    assert.equal(f.messages.at(-1)?.updates.length, 0, 'the log comes after the updates');
  });

  test('a browser passes its token as the subprotocol bearer.<token>', async () => {
    const [id] = await create(w, [wordCount()]);
    const f = await follow(`${base}/api/jobs/follow?id=${id}`, {
      protocols: ['ucompute', `bearer.${w.tokens.alice}`],
    });
    assert.equal(f.ws.protocol, 'ucompute', 'the token is not echoed back');
    assert.ok((await f.until(() => true)).newStatus);
    f.ws.close();
    await f.closed;
    // Following stopped cleanly: the job can still be driven to its end.
    await jobInState(w, id!, 'RUNNING');
    await ok(w, { url: '/api/jobs/terminate', body: { items: [{ id }] } });
  });

  test('the upgrade is refused without a token, with a bad one, and for others’ jobs', async () => {
    const [id] = await create(w, [wordCount()]);
    const url = `${base}/api/jobs/follow?id=${id}`;
    const refusals: [Parameters<typeof follow>[1], number][] = [
      [{}, 401],
      [{ token: 'uc_wrong' }, 401],
      [{ protocols: ['bearer.uc_wrong'] }, 401],
      [{ token: w.tokens.bob }, 404],
      [{ protocols: [`bearer.${w.tokens.bob}`] }, 404],
    ];
    for (const [options, status] of refusals) {
      await assert.rejects(follow(url, options), (e: { status?: number }) => e.status === status);
    }
    await assert.rejects(
      follow(`${base}/api/jobs/follow?id=nosuchjob`, { token: w.tokens.alice }),
      (e: { status?: number }) => e.status === 404,
    );
  });
});
