import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Job } from '../src/model/job.ts';
import { cachedSerializers, defaultSerializerFolder, lazySerializers } from '../src/server/serializers.ts';

const route = {
  method: 'GET',
  url: '/things',
  httpStatus: '200',
  schema: { type: 'object', properties: { n: { type: 'integer' } } },
};

test('a route’s serializer is built at its first answer, once, and answers as the eager one', () => {
  const built: string[] = [];
  const eager: SerializerFactory = () => (r) => {
    built.push(r.url);
    return (doc) => JSON.stringify({ n: Math.trunc((doc as { n: number }).n) });
  };
  const serialize = lazySerializers(eager)()(route);
  assert.deepEqual(built, []);
  assert.equal(serialize({ n: 1.5 }), '{"n":1}');
  assert.equal(serialize({ n: 2 }), '{"n":2}');
  assert.deepEqual(built, ['/things']);
});

test('with fast-json-stringify: only the schema’s fields are written', () => {
  const serialize = lazySerializers()()(route);
  assert.equal(serialize({ n: 3, secret: 'x' }), '{"n":3}');
});

/** A job list answer's schema: the Job schema holds most of our routes' unions (~90). */
const jobsRoute = {
  method: 'GET',
  url: '/api/jobs/browse',
  httpStatus: '200',
  schema: { type: 'object', properties: { items: { type: 'array', items: Job } } },
};

const specification = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard', provider: 'ucompute' },
  replicas: 1,
  resources: [],
};

/** What the job's exported parameters add to its specification. */
const resolved = {
  resolvedProduct: {
    id: 'u1-standard-1',
    category: 'u1-standard',
    cpu: 1,
    memoryInGigs: 2,
    pricePerUnit: 1,
    description: '1 vCPU, 2 GiB of memory',
  },
  allowDuplicateJob: false,
  sshEnabled: false,
};

/** Every kind of parameter value, nulls where the schema allows them, a final state. */
const everyKind = {
  a: { type: 'file', path: '/home/alice/in.txt', readOnly: true },
  b: { type: 'boolean', value: false },
  c: { type: 'text', value: 'x "quoted" \u2028' },
  d: { type: 'textarea', value: 'line\nline' },
  e: { type: 'integer', value: 3 },
  f: { type: 'floating_point', value: 0.25 },
  g: { type: 'peer', hostname: 'server-0', jobId: 'abc123' },
  h: { type: 'license_server', id: 'lic' },
  i: { type: 'network', id: 'net' },
  j: { type: 'ingress', id: 'ing' },
  k: { type: 'workflow', specification: { job: null, init: 'echo', inputs: [{ any: 1 }] } },
};

function job(
  id: string,
  state: string,
  parameters: object,
  timeAllocation: unknown,
): Record<string, unknown> {
  const spec = { ...specification, parameters, timeAllocation };
  return {
    id,
    owner: { createdBy: 'alice' },
    specification: spec,
    status: {
      state,
      ...(state === 'SUCCESS' ? { startedAt: 2, exitCode: { '0': 0 }, allowRestart: false } : {}),
      jobParametersJson: {
        siteVersion: 3,
        request: { ...spec, ...resolved },
        resolvedResources: { ingress: {} },
        machineType: { cpu: 1, memoryInGigs: 2, gpu: 0 },
      },
    },
    updates: [{ timestamp: 1, state: 'IN_QUEUE', status: 'The job is in the queue' }],
    createdAt: 1,
    output: {},
    billing: { creditsCharged: 0, pricePerUnit: 1 },
    permissions: { myself: ['READ', 'EDIT', 'ADMIN'], others: [] },
  };
}

const jobs = [
  job('j1', 'IN_QUEUE', {}, null),
  job('j2', 'SUCCESS', everyKind, { hours: 1, minutes: 0, seconds: 0 }),
];

const serializerFolder = (t: { after(fn: () => void): void }) => {
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-serializers-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'serializers');
};

/** What a serializer gives for `doc`: its text, or the message it throws. */
function outcome(serialize: (doc: unknown) => string, doc: unknown): string {
  try {
    return serialize(doc);
  } catch (error) {
    return `threw ${(error as Error).message}`;
  }
}

test('a serializer kept as code answers as the one built in memory, and refuses what it refuses', () => {
  const fresh = SerializerSelector()({}, {})(jobsRoute);
  // The folder every server of this machine uses: the kept code is read if an earlier process wrote
  // it (a compile for this schema costs ~2.5 CPU-s), else written now. Either way it is compared.
  const kept = cachedSerializers(defaultSerializerFolder())({}, {})(jobsRoute);
  const wrong = [
    { items: [{ ...jobs[0], status: { state: 'SLEEPING' } }] },
    { items: [job('j3', 'RUNNING', { x: { type: 'colour', value: 'red' } }, null)] },
    { items: [job('j4', 'RUNNING', { x: { type: 'integer', value: 'three' } }, null)] },
  ];
  for (const doc of [{ items: jobs }, ...wrong]) assert.equal(outcome(kept, doc), outcome(fresh, doc));
  assert.deepEqual(JSON.parse(fresh({ items: jobs })), { items: jobs }, 'the jobs are schema-shaped');
  assert.match(outcome(fresh, wrong[0]), /^threw /);
  assert.match(outcome(fresh, wrong[1]), /^threw /);
});

test('a kept serializer is what later builds use, not compiled again', (t) => {
  const folder = serializerFolder(t);
  cachedSerializers(folder)({}, {})(route);
  const [name] = readdirSync(folder);
  const planted = 'module.exports = () => "kept"';
  const hash = createHash('sha256').update(planted).digest('hex');
  writeFileSync(join(folder, name!), `${hash}\n${planted}`);
  assert.equal(cachedSerializers(folder)({}, {})(route)({ n: 1 }), 'kept');
});

test('a kept file is read only for the schema, shared schemas and options it was written from', (t) => {
  const folder = serializerFolder(t);
  const colours = (...names: string[]) => ({
    ...route,
    schema: {
      type: 'object',
      properties: { c: { anyOf: names.map((name) => ({ type: 'string', const: name })) } },
    },
  });
  const redGreen = cachedSerializers(folder)({}, {})(colours('red', 'green'));
  const redBlue = cachedSerializers(folder)({}, {})(colours('red', 'blue'));
  cachedSerializers(folder)({ shared: { $id: 'shared', type: 'string' } }, {})(colours('red', 'green'));
  cachedSerializers(folder)({}, { rounding: 'floor' } as never)(colours('red', 'green'));
  assert.equal(readdirSync(folder).length, 4);
  assert.equal(redBlue({ c: 'blue' }), '{"c":"blue"}');
  assert.throws(() => redGreen({ c: 'blue' }), /does not match schema definition/);
});

test('a kept file whose code does not match its hash, or does not load, is built again', (t) => {
  const folder = serializerFolder(t);
  cachedSerializers(folder)({}, {})(route);
  const file = join(folder, readdirSync(folder)[0]!);
  const good = readFileSync(file, 'utf8');
  for (const bad of [
    good.replace('"n"', '"m"'),
    good.slice(0, good.length / 2),
    `${createHash('sha256').update('}{').digest('hex')}\n}{`,
  ]) {
    writeFileSync(file, bad);
    assert.equal(cachedSerializers(folder)({}, {})(route)({ n: 2.5, m: 1 }), '{"n":2}');
    assert.equal(readFileSync(file, 'utf8'), good, 'the file is written again');
  }
});

test('a kept file is not run from a folder or as a file others can write', (t) => {
  const folder = serializerFolder(t);
  cachedSerializers(folder)({}, {})(route);
  const file = join(folder, readdirSync(folder)[0]!);
  const planted = 'module.exports = () => "planted"';
  writeFileSync(file, `${createHash('sha256').update(planted).digest('hex')}\n${planted}`);
  assert.equal(cachedSerializers(folder)({}, {})(route)({ n: 1 }), 'planted', 'our own file is read');
  for (const [path, mode] of [
    [folder, 0o777],
    [file, 0o666],
  ] as const) {
    writeFileSync(file, `${createHash('sha256').update(planted).digest('hex')}\n${planted}`);
    chmodSync(folder, 0o700);
    chmodSync(file, 0o600);
    chmodSync(path, mode);
    assert.equal(
      cachedSerializers(folder)({}, {})(route)({ n: 1 }),
      '{"n":1}',
      `${path} ${mode.toString(8)}`,
    );
  }
});

test('a folder that cannot be written costs only the compile', (t) => {
  const folder = serializerFolder(t);
  const file = join(dirname(folder), 'file');
  writeFileSync(file, '');
  const serialize = cachedSerializers(join(file, 'serializers'))({}, {})(route);
  assert.equal(serialize({ n: 4 }), '{"n":4}');
  assert.deepEqual(readdirSync(dirname(folder)), ['file']);
});

test('a write removes the files written over 30 days ago', (t) => {
  const folder = serializerFolder(t);
  cachedSerializers(folder)({}, {})(route);
  const [name] = readdirSync(folder);
  const old = join(folder, name!);
  const recent = join(folder, 'recent.js');
  writeFileSync(recent, '');
  const days = (n: number) => (Date.now() - n * 24 * 3600_000) / 1000;
  utimesSync(old, days(31), days(31));
  utimesSync(recent, days(29), days(29));
  cachedSerializers(folder)({}, {})({
    ...route,
    schema: { type: 'object', properties: { m: { type: 'string' } } },
  });
  assert.equal(readdirSync(folder).length, 2);
  assert.ok(readdirSync(folder).includes('recent.js'));
  assert.ok(!readdirSync(folder).includes(name!));
});
