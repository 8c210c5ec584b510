import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { Store } from '../src/store/store.ts';
import { jobInState, type TestServer, testServer } from './support/server.ts';
import { jobCount, openTestStore } from './support/store.ts';

/**
 * Fuzzing the job API: arbitrary JSON and mutations of valid requests never get a 5xx, and a
 * refused request changes nothing (no job rows; for terminate and extend, no job updates).
 */

const YEAR = 365 * 24 * 3600 * 1000;

interface World extends TestServer {
  tokens: { alice: string; bob: string };
}

/** alice has credits and leads project `climate`; bob has none; `secret` has no members. */
async function world(): Promise<World> {
  const store = await openTestStore();
  const now = Date.now();
  await store.users.createUser('alice', false);
  await store.users.createUser('bob', false);
  await store.accounting.grant('user:alice', 'u1-standard', 1e12, now - 1000, now + YEAR);
  await store.users.createProject('climate', 'Climate');
  await store.users.createProject('secret', 'Secret');
  await store.users.setMember('climate', 'alice', 'PI');
  await store.accounting.grant('project:climate', 'u1-standard', 1e12, now - 1000, now + YEAR);
  const tokens = {
    alice: await store.users.createToken('alice', 'fuzz'),
    bob: await store.users.createToken('bob', 'fuzz'),
  };
  return { ...(await testServer(store)), tokens };
}

const jobRows = (store: Store) => jobCount(store);
/** Every update of every job. */
async function updateRows(store: Store): Promise<number> {
  const jobs = await store.jobs.browse({ visibility: 'all', limit: 1_000_000 });
  return jobs.reduce((n, job) => n + job.updateCount, 0);
}

// ---- arbitraries ---------------------------------------------------------------------------------

const anyJson = fc.jsonValue({ maxDepth: 4 });

const duration = fc.record({
  hours: fc.integer({ min: 0, max: 48 }),
  minutes: fc.integer({ min: 0, max: 59 }),
  seconds: fc.integer({ min: 1, max: 59 }),
});

/** Valid job specifications of two applications, with files in `drive`. */
const validSpec = (drive: string) =>
  fc.oneof(
    fc
      .record({
        top: fc.integer({ min: 1, max: 10_000 }),
        ignoreCase: fc.boolean(),
        name: fc.option(fc.stringMatching(/^[\w ():_-]{1,30}$/), { nil: undefined }),
        timeAllocation: fc.option(duration, { nil: undefined }),
      })
      .map(({ top, ignoreCase, name, timeAllocation }) => ({
        application: { name: 'word-count', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: {
          input: { type: 'file', path: `${drive}/in.txt`, readOnly: true },
          top: { type: 'integer', value: top },
          ignoreCase: { type: 'boolean', value: ignoreCase },
        },
        ...(name !== undefined ? { name } : {}),
        ...(timeAllocation !== undefined ? { timeAllocation } : {}),
      })),
    fc
      .record({ replicas: fc.integer({ min: 1, max: 4 }), slots: fc.integer({ min: 1, max: 128 }) })
      .map(({ replicas, slots }) => ({
        application: { name: 'mpi-hello', version: '1.0' },
        product: { id: 'u1-standard-2', category: 'u1-standard', provider: 'ucompute' },
        replicas,
        parameters: { slots: { type: 'integer', value: slots } },
      })),
  );

/** Where a request is made: who, in which project, and the drive its files must be in. */
const workspace = fc.constantFrom(
  { as: 'alice' as const, drive: '/home/alice' },
  { as: 'alice' as const, drive: '/home/alice' },
  { as: 'alice' as const, project: 'climate', drive: '/projects/climate' },
  { as: 'alice' as const, project: 'secret', drive: '/projects/secret' },
  { as: 'bob' as const, drive: '/home/bob' },
);

/** Values near what the service checks: edges of ranges, other products and drives, wrong names. */
const plausible = fc.constantFrom<unknown>(
  0,
  -1,
  1,
  129,
  1000,
  1001,
  10_001,
  1_000_000,
  2 ** 53,
  1.5,
  '',
  'u1-gpu',
  'u1-gpu-1',
  'u1-secure-2',
  'ucompute',
  'elsewhere',
  'word-count',
  'mpi-hello',
  '9.9',
  '/home/bob/in.txt',
  '/home/alice/../bob/in.txt',
  '/projects/climate/in.txt',
  'relative/path',
  true,
  null,
  { type: 'text', value: 'x' },
  { type: 'integer', value: 3 },
  { hours: 0, minutes: 0, seconds: 0 },
);

type Json = unknown;
type Mutation = 'replace' | 'delete' | 'add' | 'stringify' | 'wrap';

/** Every path to a value inside `value` (objects' keys, lists' indexes), the root first. */
function paths(value: Json, at: (string | number)[] = []): (string | number)[][] {
  const out = [at];
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) out.push(...paths(v, [...at, i]));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...at, k]));
  }
  return out;
}

/** A copy of `value` with one change at one of its paths. */
function mutate(value: Json, pick: number, how: Mutation, replacement: Json): Json {
  const copy = structuredClone(value);
  const all = paths(copy).slice(1);
  if (all.length === 0) return replacement;
  const path = all[pick % all.length]!;
  const key = path.at(-1)!;
  let parent: Json = copy;
  for (const k of path.slice(0, -1)) parent = (parent as Record<string | number, Json>)[k];
  const container = parent as Record<string | number, Json>;
  const current = container[key];
  switch (how) {
    case 'replace':
      container[key] = replacement;
      break;
    case 'delete':
      if (Array.isArray(container)) container.splice(key as number, 1);
      else delete container[key];
      break;
    case 'add':
      if (current !== null && typeof current === 'object' && !Array.isArray(current)) {
        (current as Record<string, Json>).unexpected = replacement;
      } else if (Array.isArray(current)) current.push(replacement);
      else container[key] = [current, replacement];
      break;
    case 'stringify':
      container[key] = typeof current === 'string' ? Number(current) : JSON.stringify(current);
      break;
    case 'wrap':
      container[key] = [current];
      break;
  }
  return copy;
}

const mutation = fc.constantFrom<Mutation>('replace', 'delete', 'add', 'stringify', 'wrap');

/** Header values a client could send: printable ASCII, sometimes too long. */
const headerValue = fc.stringMatching(/^[!-~]{1,250}$/);

// ---- POST /api/jobs ------------------------------------------------------------------------------

describe('fuzzing POST /api/jobs', () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  /** Idempotency keys seen, per user, with the ids their first success returned. */
  const keys = new Map<string, string[]>();

  async function post(body: string, as: 'alice' | 'bob', headers: Record<string, string | undefined>) {
    const before = await jobRows(w.store);
    const sent: Record<string, string> = {
      authorization: `Bearer ${w.tokens[as]}`,
      'content-type': 'application/json',
    };
    for (const [k, v] of Object.entries(headers)) if (v !== undefined) sent[k] = v;
    const response = await w.app.inject({ method: 'POST', url: '/api/jobs', headers: sent, payload: body });
    const context = `${response.statusCode} ${response.body.slice(0, 500)}\nbody: ${body.slice(0, 500)}`;
    assert.ok(response.statusCode < 500, context);
    const parsed = response.json() as { responses?: { id: string }[]; message?: unknown };
    const created = (await jobRows(w.store)) - before;
    if (response.statusCode !== 200) {
      assert.equal(typeof parsed.message, 'string', context);
      assert.equal(created, 0, `a refused request created jobs: ${context}`);
      return;
    }
    const ids = parsed.responses!.map((r) => r.id);
    const key =
      headers['idempotency-key'] !== undefined ? `${as}\u0000${headers['idempotency-key']}` : undefined;
    const seen = key !== undefined ? keys.get(key) : undefined;
    if (seen) {
      assert.deepEqual(ids, seen, context);
      assert.equal(created, 0, `a repeat created jobs: ${context}`);
    } else {
      assert.equal(created, ids.length, context);
      if (key !== undefined) keys.set(key, ids);
    }
  }

  const caller = fc.constantFrom<'alice' | 'bob'>('alice', 'alice', 'alice', 'bob');
  // Mostly no key; sometimes one of two shared keys (repeats, conflicts), sometimes any value.
  const key = fc.oneof(
    { weight: 6, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom('k1', 'k2') },
    { weight: 1, arbitrary: headerValue },
  );
  const headers = fc.record({
    'idempotency-key': key,
    project: fc.option(fc.constantFrom('climate', 'secret', 'nowhere', 'Not An Id'), { nil: undefined }),
  });

  test('arbitrary JSON bodies never get a 5xx and create nothing when refused', async () => {
    const body = fc.oneof(
      anyJson,
      fc.record({ items: fc.array(anyJson, { maxLength: 4 }) }),
      fc.record({ items: fc.array(fc.dictionary(fc.string({ maxLength: 12 }), anyJson), { maxLength: 3 }) }),
    );
    await fc.assert(
      fc.asyncProperty(body, caller, headers, (b, as, h) => post(JSON.stringify(b), as, h)),
      { numRuns: 300 },
    );
  });

  test('text that is not JSON never gets a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 200 }), (text) => post(text, 'alice', {})),
      { numRuns: 100 },
    );
  });

  test('mutations of valid requests never get a 5xx and create nothing when refused', async () => {
    const request = workspace.chain((place) =>
      fc.record({
        place: fc.constant(place),
        specs: fc.array(validSpec(place.drive), { minLength: 1, maxLength: 3 }),
        target: fc.nat(),
        pick: fc.nat(),
        how: mutation,
        replacement: fc.oneof(plausible, anyJson),
        mutateEnvelope: fc.boolean(),
        mutate: fc.boolean(),
        key,
      }),
    );
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const envelope: Json = { items: r.specs };
        const body = !r.mutate
          ? envelope
          : r.mutateEnvelope
            ? mutate(envelope, r.pick, r.how, r.replacement)
            : {
                items: r.specs.map((s, i) =>
                  i === r.target % r.specs.length ? mutate(s, r.pick, r.how, r.replacement) : s,
                ),
              };
        await post(JSON.stringify(body), r.place.as, { 'idempotency-key': r.key, project: r.place.project });
      }),
      { numRuns: 400 },
    );
  });

  test('valid requests are accepted (the fuzzing above reaches the service)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(validSpec('/home/alice'), { minLength: 1, maxLength: 3 }), async (specs) => {
        const response = await w.app.inject({
          method: 'POST',
          url: '/api/jobs',
          headers: { authorization: `Bearer ${w.tokens.alice}` },
          payload: { items: specs },
        });
        assert.equal(response.statusCode, 200, response.body);
      }),
      { numRuns: 30 },
    );
  });
});

// ---- terminate and extend ------------------------------------------------------------------------

describe('fuzzing terminate and extend', () => {
  let w: World;
  let ids: string[] = [];
  before(async () => {
    w = await world();
    const response = await w.app.inject({
      method: 'POST',
      url: '/api/jobs',
      headers: { authorization: `Bearer ${w.tokens.alice}` },
      payload: {
        // Six to terminate, six to extend: terminating first must not leave extend nothing to do.
        items: Array.from({ length: 12 }, () => ({
          application: { name: 'mpi-hello', version: '1.0' },
          product: { id: 'u1-standard-2', category: 'u1-standard' },
        })),
      },
    });
    ids = (response.json() as { responses: { id: string }[] }).responses.map((r) => r.id);
    for (const id of ids) await jobInState(w, id, 'RUNNING');
  });
  after(() => w.close());

  async function send(url: string, body: Json, as: 'alice' | 'bob') {
    const before = await updateRows(w.store);
    const response = await w.app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${w.tokens[as]}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    const context = `${url} ${response.statusCode} ${response.body.slice(0, 300)}\nbody: ${JSON.stringify(body)}`;
    assert.ok(response.statusCode < 500, context);
    if (response.statusCode !== 200) {
      assert.equal(await updateRows(w.store), before, `a refused request changed jobs: ${context}`);
    }
  }

  const jobId = (offset: number) =>
    fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom(0, 1, 2, 3, 4, 5).map((i) => ids[offset + i]!) },
      { weight: 1, arbitrary: fc.constantFrom('nosuchjob', '', 'UPPER', 'a'.repeat(41)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    );
  const as = fc.constantFrom<'alice' | 'bob'>('alice', 'alice', 'bob');

  test('terminate: arbitrary and mutated bodies never get a 5xx', async () => {
    const valid = fc.array(
      jobId(0).map((id) => ({ id })),
      { minLength: 1, maxLength: 3 },
    );
    const body = fc.oneof(
      anyJson,
      valid.map((items) => ({ items })),
      fc
        .tuple(valid, fc.nat(), mutation, anyJson)
        .map(([items, pick, how, replacement]) => mutate({ items }, pick, how, replacement)),
    );
    await fc.assert(
      fc.asyncProperty(body, as, (b, who) => send('/api/jobs/terminate', b, who)),
      { numRuns: 150 },
    );
  });

  test('extend: arbitrary and mutated bodies never get a 5xx', async () => {
    const requestedTime = fc.oneof(
      { weight: 4, arbitrary: duration },
      {
        weight: 1,
        arbitrary: fc.record({ hours: fc.integer(), minutes: fc.integer(), seconds: fc.integer() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          hours: fc.integer({ min: 0, max: 1_000_000 }),
          minutes: fc.integer({ min: 0, max: 59 }),
          seconds: fc.integer({ min: 0, max: 59 }),
        }),
      },
    );
    const valid = fc.array(fc.record({ jobId: jobId(6), requestedTime }), { minLength: 1, maxLength: 3 });
    const body = fc.oneof(
      anyJson,
      valid.map((items) => ({ items })),
      fc
        .tuple(valid, fc.nat(), mutation, anyJson)
        .map(([items, pick, how, replacement]) => mutate({ items }, pick, how, replacement)),
    );
    await fc.assert(
      fc.asyncProperty(body, as, (b, who) => send('/api/jobs/extend', b, who)),
      { numRuns: 150 },
    );
  });
});
