import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import type { Job } from '../src/model/job.ts';
import { inlined, literal } from '../src/store/postgres/literals.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { openSqliteStore } from '../src/store/sqlite/store.ts';
import type { Store } from '../src/store/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { type TestServer, testServer } from './support/server.ts';
import { jobCount, STORE_KINDS, type StoreKind } from './support/store.ts';

// On PostgreSQL the intake's insert goes with the commit as one simple query, its values written
// into the statement as literals (database.ts: literal, inlined). Here every field a user
// controls is given text that would break a literal badly quoted or a placeholder shifted, is
// accepted through the API the way any job is, and is read back unchanged: through the API, the
// store, and on PostgreSQL the rows themselves. Text that no job can hold is a 400 naming the field.

const HOSTILE: readonly string[] = [
  "'",
  "''",
  "o'neil",
  '\\',
  '\\\\',
  "\\'",
  "\\''",
  "E'x'",
  "E'\\x27'",
  "U&'\\0041'",
  '$$',
  '$$; drop table jobs; $$',
  '$1 $2',
  '?',
  '??',
  '? ?| ?& ->> #>>',
  '-- ?\n?',
  '/* ? */ ?',
  "'); drop table jobs; --",
  '"',
  '\\"',
  '{}',
  '{',
  '}',
  ',',
  'NULL',
  'null',
  '{NULL}',
  '{"a","b"}',
  '{a,b}',
  '""',
  ';',
  '\n',
  '\r\n',
  '\t\v\f\b',
  '\u0001\u001f\u007f',
  '😀 👩‍👩‍👧',
  '\u200f\u202eabc\u202c',
  '\u2028\u2029',
  '\uFEFF',
  'é ß Ω 中文',
  '\uD83D\uDE00 (a pair, not lone)',
  '',
  '   ',
  "a'b\\c\\'d E'x' $$ ? ?| \"q\" {x,y} NULL \n\u2028\u200f😀;",
  `${"x'\\?".repeat(10_000)}`,
];

/** Text no job can hold: the API answers 400 naming the field, and stores nothing. */
const UNHOLDABLE: readonly [string, RegExp][] = [
  ['a\u0000b', /NUL byte/],
  ['\u0000', /NUL byte/],
  ['a\uD800b', /lone surrogate/],
  ['\uDC00\uD800', /lone surrogate/],
  ['tail \uD83D', /lone surrogate/],
];

const DAY = 24 * 3_600_000;
const MPI = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
};
const TERMINAL = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};
/**
 * A user whose name is hostile too (an administrator gives it); a project id is refused unless it
 * is `[a-z0-9][a-z0-9_.-]*` (the Project header), so it can only be odd.
 */
const USER = 'o\'neil\\"{,}?NULL$$';
const PROJECT = 'p.q_r-s';

interface World extends TestServer {
  url?: string;
  token: string;
  call(url: string, body?: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
}

async function world(kind: StoreKind): Promise<World> {
  const url = kind === 'postgres' ? await newPostgresDatabase() : undefined;
  const store: Store = url ? await openPostgresStore(url) : openSqliteStore(':memory:');
  const now = Date.now();
  await store.users.createUser(USER, false);
  await store.users.createProject(PROJECT, 'Hostile');
  await store.users.setMember(PROJECT, USER, 'PI');
  await store.accounting.grant(`user:${USER}`, 'u1-standard', 1e9, now - DAY, now + DAY);
  await store.accounting.grant(`project:${PROJECT}`, 'u1-standard', 1e9, now - DAY, now + DAY);
  const token = await store.users.createToken(USER, 'test');
  const server = await testServer(store);
  return {
    ...server,
    ...(url ? { url } : {}),
    token,
    call: (path, body, headers = {}) =>
      server.app.inject({
        method: body === undefined ? 'GET' : 'POST',
        url: path,
        headers: { authorization: `Bearer ${token}`, ...headers },
        ...(body === undefined ? {} : { payload: body as object }),
      }),
  };
}

/** Every hostile text in every field a user gives a job: one job per text and field. */
function hostileJobs(): Record<string, unknown>[] {
  const jobs: Record<string, unknown>[] = [];
  for (const text of HOSTILE) {
    jobs.push({ ...MPI, parameters: { command: { type: 'text', value: text } } });
    // A file name holds no `/` and at most 255 bytes; a path no NUL.
    const name = text.replaceAll('/', '').slice(0, 60);
    if (name.trim() !== '' && name !== '.' && name !== '..') {
      jobs.push({
        ...TERMINAL,
        name: 'hostile (names): allowed_-',
        resources: [
          { type: 'file', path: `/home/${USER}/${name}`, readOnly: true },
          { type: 'file', path: `/projects/${PROJECT}/${name}x` },
        ],
      });
    }
  }
  return jobs;
}

for (const kind of STORE_KINDS) {
  describe(`hostile text through intake (${kind})`, () => {
    let w: World;
    before(async () => {
      w = await world(kind);
    });
    after(() => w.close());

    test('every field a user gives is kept as given: API, store, rows and job events', async () => {
      const jobs = hostileJobs();
      // Three requests at once (one intake flush, several requests in it) and one as the project.
      const halves = [jobs.slice(0, 30), jobs.slice(30, 60), jobs.slice(60)];
      const responses = await Promise.all([
        ...halves.map((items, i) =>
          w.call('/api/jobs', { items }, { 'idempotency-key': `k'\\"?{,}$$ ${i}` }),
        ),
        w.call('/api/jobs', { items: jobs.slice(0, 5) }, { project: PROJECT }),
      ]);
      const sent: Record<string, unknown>[] = [...halves.flat(), ...jobs.slice(0, 5)];
      const ids: string[] = [];
      for (const r of responses) {
        assert.equal(r.statusCode, 200, r.body.slice(0, 500));
        ids.push(...r.json<{ responses: { id: string }[] }>().responses.map((x) => x.id));
      }
      assert.equal(ids.length, sent.length);
      assert.equal(new Set(ids).size, ids.length);

      for (const [i, id] of ids.entries()) {
        const r = await w.call(
          `/api/jobs/retrieve?id=${id}`,
          undefined,
          i >= halves.flat().length ? { project: PROJECT } : {},
        );
        assert.equal(r.statusCode, 200, r.body.slice(0, 300));
        const job = r.json<Job>();
        const given = sent[i]!;
        // Strings compared as JavaScript strings: every UTF-16 unit, so every byte of their UTF-8.
        assert.deepEqual(job.specification.parameters, given.parameters ?? job.specification.parameters);
        if (given.resources) assert.deepEqual(job.specification.resources, given.resources);
        if (given.name) assert.equal(job.specification.name, given.name);
        assert.equal(job.owner.createdBy, USER);
        assert.equal(job.owner.project, i >= halves.flat().length ? PROJECT : undefined);
        // The store's copy (the API adds the defaults on the way out).
        const stored = (await w.store.jobs.get(id))!.specification;
        assert.deepEqual(stored.parameters, given.parameters);
        assert.deepEqual(stored.resources, given.resources);
        assert.equal(stored.name, given.name);
      }

      // Each job's first event is its first update (the backend runs the jobs meanwhile: later
      // events follow), numbered in order.
      const events = await w.store.jobEvents.after(0, 100_000);
      assert.ok(events.every((e, i) => i === 0 || e.seq > events[i - 1]!.seq));
      const first = new Map<string, (typeof events)[number]>();
      for (const e of events) if (!first.has(e.jobId)) first.set(e.jobId, e);
      assert.deepEqual([...first.keys()].sort(), [...ids].sort());
      for (const e of first.values()) {
        assert.equal(e.update?.state, 'IN_QUEUE');
        assert.equal(e.update?.status, 'The job is in the queue');
      }

      // A repeat of a request under its (hostile) key answers the same ids: the key was kept.
      const again = await w.call('/api/jobs', { items: halves[1] }, { 'idempotency-key': `k'\\"?{,}$$ 1` });
      assert.equal(again.statusCode, 200, again.body.slice(0, 300));
      assert.deepEqual(
        again.json<{ responses: { id: string }[] }>().responses.map((x) => x.id),
        ids.slice(30, 60),
      );

      if (w.url) {
        // The rows themselves, as PostgreSQL keeps them.
        const client = new pg.Client({ connectionString: w.url });
        await client.connect();
        try {
          const { rows } = await client.query(
            `select j.id, j.created_by, j.project, j.application, j.product_category, j.specification,
                u.body, specification::jsonb as spec_jsonb
             from jobs j join job_updates u on u.job_id = j.id and u.seq = 0 where j.id = any($1)`,
            [ids],
          );
          assert.equal(rows.length, ids.length);
          for (const row of rows) {
            const i = ids.indexOf(row.id);
            const stored = (await w.store.jobs.get(row.id))!;
            assert.equal(row.created_by, USER);
            assert.equal(row.project, i >= halves.flat().length ? PROJECT : null);
            assert.equal(row.product_category, 'u1-standard');
            assert.equal(row.specification, JSON.stringify(stored.specification));
            assert.deepEqual(row.spec_jsonb, stored.specification);
            assert.equal(JSON.parse(row.body).state, 'IN_QUEUE');
          }
          const { rows: ev } = await client.query(
            'select job_id from job_events where job_id = any($1) and update_seq = 0',
            [ids],
          );
          assert.deepEqual(ev.map((r) => r.job_id).sort(), [...ids].sort());
        } finally {
          await client.end();
        }
      }

      // Searches read every job of the owner (on PostgreSQL, each one's specification as jsonb).
      for (const query of ['hostile', "'", '\\', '?', '%', '_', "'); --"]) {
        const s = await w.call('/api/jobs/search', { query, itemsPerPage: 250 });
        assert.equal(s.statusCode, 200, s.body.slice(0, 300));
      }
      const found = await w.call('/api/jobs/search', { query: 'hostile', itemsPerPage: 250 });
      assert.ok(found.json<{ items: unknown[] }>().items.length > 0);
      const browsed = await w.call('/api/jobs/browse?filterProductId=u1-standard-2&itemsPerPage=250');
      assert.equal(browsed.statusCode, 200, browsed.body.slice(0, 300));
    });

    test('text no job can hold (NUL, lone surrogates) is a 400 naming the field; nothing is stored', async () => {
      const before = await jobCount(w.store);
      const refused = async (item: Record<string, unknown>, path: string, message: RegExp) => {
        const r = await w.call('/api/jobs', { items: [{ ...MPI }, item] });
        assert.equal(r.statusCode, 400, `${path}: ${r.body.slice(0, 300)}`);
        const { issues } = r.json<{ issues: { path: string; message: string }[] }>();
        assert.deepEqual(
          issues.map((i) => i.path),
          [`items[1].${path}`],
        );
        assert.match(issues[0]!.message, message);
      };
      for (const [text, message] of UNHOLDABLE) {
        await refused(
          { ...MPI, parameters: { command: { type: 'text', value: text } } },
          'specification.parameters.command',
          message,
        );
        await refused(
          { ...TERMINAL, resources: [{ type: 'file', path: `/home/${USER}/${text}` }] },
          'specification.resources[0].path',
          message,
        );
        await refused(
          { ...TERMINAL, openedFile: `/home/${USER}/${text}` },
          'specification.openedFile',
          message,
        );
      }
      assert.equal(await jobCount(w.store), before);
      // The owner's searches still answer.
      const s = await w.call('/api/jobs/search', { query: 'a', itemsPerPage: 250 });
      assert.equal(s.statusCode, 200, s.body.slice(0, 300));
      const b = await w.call('/api/jobs/browse?filterProductId=u1-standard-2');
      assert.equal(b.statusCode, 200, b.body.slice(0, 300));
    });
  });
}

describe('PostgreSQL: literals as node-postgres sends parameters', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, () => {
  let client: pg.Client;
  let url: string;
  before(async () => {
    url = await newPostgresDatabase();
    client = new pg.Client({ connectionString: url });
    await client.connect();
  });
  after(() => client.end());

  test('every value the store sends reads back as the same value sent as a parameter', async () => {
    const cases: [string, unknown][] = [
      ...HOSTILE.map((t): [string, unknown] => ['text', t]),
      ['text', HOSTILE],
      ['text[]', HOSTILE],
      ['text[]', [null, 'NULL', '', '"', '\\', '{}', ',', "'", '?', undefined]],
      ['text[]', []],
      [
        'text[][]',
        [
          ['a"b', 'c\\d'],
          ['{e}', 'NULL'],
        ],
      ],
      ['text[]', [{ a: "x'y" }, { '?': '\\"' }]],
      ['text[]', [1, 2.5, true, 10n]],
      ['bigint', 0],
      ['bigint', -1],
      ['bigint', Number.MAX_SAFE_INTEGER],
      ['bigint', -Number.MAX_SAFE_INTEGER],
      ['bigint', 2n ** 62n],
      ['bigint', '42'],
      ['bigint[]', [1, null, -2, 2n ** 62n]],
      [
        'bigint[][]',
        [
          [1, 2],
          [3, 4],
        ],
      ],
      ['double precision', 0.1 + 0.2],
      ['double precision', -0],
      ['double precision', 5e-324],
      ['double precision', Number.MAX_VALUE],
      ['double precision', Number.NaN],
      ['double precision', Number.POSITIVE_INFINITY],
      ['double precision', Number.NEGATIVE_INFINITY],
      ['double precision[]', [0.1, Number.NaN, null, Number.NEGATIVE_INFINITY, 1e-300]],
      ['boolean', true],
      ['boolean', false],
      ['boolean[]', [true, false, null]],
      ['jsonb', { a: "x'y", "k'?": [1, '\\', null], u: '😀\u2028\u200f', n: 'NULL', e: "E'\\x'" }],
      ['jsonb', [1, 'two', { three: 3 }]],
      ['text', null],
      ['text', undefined],
    ];
    for (const [type, value] of cases) {
      const label = `${type} ${String(JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v)))?.slice(0, 60)}`;
      const outcome = (q: Promise<pg.QueryResult>) =>
        q.then(
          (r) => ({ rows: r.rows }),
          (e: { code?: string }) => ({ error: e.code }),
        );
      const asParameter = await outcome(client.query(`select $1::${type} as v`, [value]));
      const asLiteral = await outcome(client.query(inlined(`select ?::${type} as v`, [value])));
      assert.deepEqual(asLiteral, asParameter, label);
      if (!('rows' in asParameter)) continue;
      // Several statements in one simple query, as the commit sends them: none takes another's text.
      const two = (await client.query(
        `${inlined(`select ?::${type} as v`, [value])}; ${inlined(`select ?::${type} as v, ?::text as w`, [value, '?'])}`,
      )) as unknown as pg.QueryResult[];
      assert.deepEqual(two[0]!.rows, asParameter.rows, label);
      assert.deepEqual(two[1]!.rows, [{ ...asParameter.rows[0], w: '?' }], label);
    }
  });

  test('what it would render wrongly, or cannot send, is refused, not sent', () => {
    const refusals: unknown[] = [
      new Date(0),
      Buffer.from('x'),
      new Uint8Array([1]),
      new ArrayBuffer(1),
      { toPostgres: () => 'x' },
      Symbol('s'),
      () => 1,
      'a\u0000b',
      [new Date(0)],
      ['a', [Buffer.from('x')]],
      ['a\u0000b'],
      [Symbol('s')],
    ];
    for (const value of refusals) {
      assert.throws(() => literal(value), /not sent as a literal|NUL byte/, String(typeof value));
      assert.throws(() => inlined('select ?', [value]), /not sent as a literal|NUL byte/);
    }
  });

  test('a `?` that is not a placeholder in a statement inlined is refused: values never shift', async () => {
    const shifted: [string, unknown[]][] = [
      ['select ?::text -- why?', ['a']],
      ['select ?::text /* ? */, ?::text', ['a', 'b']],
      ['select \'{"a":1}\'::jsonb ?| ?::text[]', [['a']]],
      ["select '?' || ?::text", ['a']],
      ['select ?, ?', [1]],
      ['select ?', [1, 2]],
    ];
    for (const [text, values] of shifted)
      assert.throws(() => inlined(text, values), /placeholders given/, text);
    // A `?` inside a value is the value's: it takes no placeholder's place.
    const { rows } = await client.query(inlined('select ?::text as a, ?::text as b', ['?', "?'?"]));
    assert.deepEqual(rows, [{ a: '?', b: "?'?" }]);
  });
});
