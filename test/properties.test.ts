/**
 * Property-based tests (fast-check) of the input boundaries: job specifications into prepareJob and
 * planJob, YAML text into buildCatalog, and `var` invocation items into renderCommand. Every run is
 * bounded by an explicit `numRuns`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { parseAllDocuments, stringify } from 'yaml';
import { buildCatalog, type CatalogIssue, loadCatalog, readCatalogFiles } from '../src/catalog/catalog.ts';
import { renderCommand } from '../src/catalog/invocation.ts';
import { loadProducts } from '../src/catalog/products.ts';
import { planJob } from '../src/jobs/plan.ts';
import { type JobEnvironment, prepareJob } from '../src/jobs/prepare.ts';
import type {
  Application,
  ApplicationParameter,
  ResolvedApplication,
  VariableParameter,
} from '../src/model/application.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import type { AppParameterValue } from '../src/model/parameter-value.ts';
import type { Container, KubernetesObject, VolcanoJob } from '../src/volcano/api/types.ts';
import { kubernetesObjectProblems } from './support/kubernetes-schemas.ts';

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const catalog = await loadCatalog(root('examples/apps'));
const products = await loadProducts(root('examples/products.yml'));
/** The example catalogue's mpi-hello runs as root, which the operator allows here. */
const ROOT_APPS = { allowRootApps: true };
/** Any time is valid here, none included: no maximum. */
const ANY_TIME = { maxTimeAllocationHours: null };
const env: JobEnvironment = {
  catalog,
  products,
  config: resolvePipelineConfig({ security: ROOT_APPS, ...ANY_TIME }),
};
const alice = { createdBy: 'alice' };
const identity = { id: 'abc123', owner: alice, createdAt: 1_700_000_000_000 };

// The example jobs, moved into alice's drive.
const exampleSpecs: unknown[] = ['word-count', 'mpi-hello'].map((name) =>
  JSON.parse(
    readFileSync(root(`examples/jobs/${name}.json`), 'utf8').replaceAll('/home/local/', '/home/alice/'),
  ),
);

type Json = unknown;
type Step = string | number;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Sets an own property, as JSON.parse would: `__proto__` stays a key instead of replacing the prototype. */
function setOwn(target: Record<string, unknown> | unknown[], key: Step, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

// ---------------------------------------------------------------------------------------------------------------
// Arbitraries shared by the sections

const weirdString = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom(
    '',
    ' ',
    'NaN',
    'Infinity',
    '-Infinity',
    '1e309',
    '0x10',
    '-0',
    '__proto__',
    'constructor',
    '\u0000',
    'a\nb',
    '../..',
    '😀',
    'ø',
  ),
);
const hugeNumber = fc.constantFrom(
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  -Number.MAX_SAFE_INTEGER,
  1e21,
  1e308,
  -1e308,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
  -0,
  2 ** 31,
  2 ** 63,
);
const anyNumber = fc.oneof(fc.integer(), fc.double(), hugeNumber);

const segment = fc.oneof(
  fc.constantFrom('..', '.', '', 'alice', 'bob', 'home', 'Jobs', 'a b', 'x:y', '-', '😀', 'ø', '\u0000'),
  fc.stringMatching(/^[a-z0-9]{1,6}$/),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);
const segments = fc.array(segment, { maxLength: 5 }).map((s) => s.join('/'));
/** Paths inside, beside and outside /home/alice, relative ones, and ones that climb out with `..`. */
const filePath = fc.oneof(
  segments.map((s) => `/home/alice/${s}`),
  segments.map((s) => `/${s}`),
  segments,
  fc.constantFrom(
    '/home/alice',
    '/home/alice/',
    '/home/alice/..',
    '/home/alice/../bob/x',
    '/home/alicebob/x',
    '/home/bob/x',
    '/home',
    '/',
    '//home/alice/x',
    '/projects/p/x',
    '~/x',
    'home/alice/x',
    '',
  ),
);

const dnsLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
const jobId = fc.stringMatching(/^[a-z0-9]{1,40}$/);

/** Values of every AppParameterValue type, with contents both plausible and not. */
const anyParameterValue: fc.Arbitrary<Json> = fc.oneof(
  fc.record(
    { type: fc.constant('file'), path: filePath, readOnly: fc.oneof(fc.boolean(), weirdString) },
    { requiredKeys: ['type', 'path'] },
  ),
  fc.record({ type: fc.constant('boolean'), value: fc.oneof(fc.boolean(), weirdString) }),
  fc.record({ type: fc.constantFrom('text', 'textarea'), value: fc.oneof(weirdString, anyNumber) }),
  fc.record({ type: fc.constantFrom('integer', 'floating_point'), value: fc.oneof(anyNumber, weirdString) }),
  fc.record({
    type: fc.constant('peer'),
    hostname: fc.oneof(dnsLabel, weirdString),
    jobId: fc.oneof(jobId, weirdString),
  }),
  fc.record({ type: fc.constantFrom('license_server', 'network', 'ingress'), id: weirdString }),
  fc.record({ type: weirdString, value: weirdString }),
);

// ---------------------------------------------------------------------------------------------------------------
// Valid specifications, built from each application's own parameter definitions

const safeName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,15}$/);
const underAlice = safeName.map((name) => `/home/alice/${name}`);
const duration = fc
  .record({
    hours: fc.integer({ min: 0, max: 1000 }),
    minutes: fc.integer({ min: 0, max: 59 }),
    seconds: fc.integer({ min: 0, max: 59 }),
  })
  .filter((d) => d.hours + d.minutes + d.seconds > 0);
const peerValue = fc.record({ type: fc.constant('peer' as const), hostname: dnsLabel, jobId });

function validValue(p: ApplicationParameter): fc.Arbitrary<AppParameterValue> | undefined {
  switch (p.type) {
    case 'input_file':
    case 'input_directory':
      return fc.record(
        { type: fc.constant('file' as const), path: underAlice, readOnly: fc.boolean() },
        { requiredKeys: ['type', 'path'] },
      );
    case 'integer':
      return fc
        .integer({ min: p.min ?? Number.MIN_SAFE_INTEGER, max: p.max ?? Number.MAX_SAFE_INTEGER })
        .map((value) => ({ type: 'integer' as const, value }));
    case 'floating_point':
      return fc
        .double({ min: p.min ?? -1e12, max: p.max ?? 1e12, noNaN: true })
        .map((value) => ({ type: 'floating_point' as const, value }));
    case 'boolean':
      return fc.boolean().map((value) => ({ type: 'boolean' as const, value }));
    case 'enumeration':
      return fc
        .constantFrom(...p.options)
        .chain((o) => fc.constantFrom(o.value, o.name))
        .map((value) => ({ type: 'text' as const, value }));
    case 'text':
    case 'textarea':
      return fc
        .string({ unit: 'grapheme', maxLength: 40 })
        .map((value) => ({ type: p.type === 'text' ? ('text' as const) : ('textarea' as const), value }));
    case 'peer':
      return peerValue;
    default:
      return undefined; // license servers, ingresses and networks: none configured or offered
  }
}

interface ValidCase {
  spec: Record<string, unknown>;
  config: { namespaceStrategy: 'per-owner' | 'single'; minikube: boolean; allowInternet: boolean };
  jobId: string;
}

function validSpec({ application }: ResolvedApplication): fc.Arbitrary<Record<string, unknown>> {
  const inv = application.invocation;
  const parameters: Record<string, fc.Arbitrary<AppParameterValue>> = {};
  const required: string[] = [];
  for (const p of inv.parameters) {
    const arb = validValue(p);
    if (arb === undefined) {
      assert.ok(p.optional, `no valid value for mandatory ${p.type} parameter ${p.name}`);
      continue;
    }
    parameters[p.name] = arb;
    if (!p.optional && p.defaultValue === undefined) required.push(p.name);
  }
  const resources = fc.tuple(
    inv.allowAdditionalMounts
      ? fc.array(
          fc.record({ type: fc.constant('file' as const), path: underAlice, readOnly: fc.boolean() }),
          {
            maxLength: 3,
          },
        )
      : fc.constant([]),
    inv.allowAdditionalPeers ? fc.array(peerValue, { maxLength: 2 }) : fc.constant([]),
  );
  return fc
    .record(
      {
        application: fc.constant({ name: application.metadata.name, version: application.metadata.version }),
        product: fc.tuple(fc.constantFrom(...products), fc.boolean()).map(([p, withProvider]) => ({
          id: p.id,
          category: p.category,
          ...(withProvider ? { provider: 'ucompute' } : {}),
        })),
        name: fc.stringMatching(/^[\w ():_-]{1,40}$/),
        replicas: inv.allowMultiNode ? fc.integer({ min: 1, max: 4 }) : fc.constant(1),
        parameters: fc.record(parameters, { requiredKeys: required, noNullPrototype: true }),
        resources: resources.map(([files, peers]) => [...files, ...peers]),
        timeAllocation: fc.option(duration),
        openedFile: safeName.map((name) => `/home/alice/opened/${name}`),
        restartOnExit: fc.constant(false),
        sshEnabled: fc.constant(false),
        allowDuplicateJob: fc.boolean(),
      },
      { requiredKeys: ['application', 'product', 'parameters'], noNullPrototype: true },
    )
    .filter(hasDistinctPeers);
}

/** Two peers with one host name are refused by design; keep the generated specs valid. */
function hasDistinctPeers(spec: Record<string, unknown>): boolean {
  const values = [
    ...Object.values((spec.parameters ?? {}) as Record<string, AppParameterValue>),
    ...((spec.resources ?? []) as AppParameterValue[]),
  ];
  const hosts = values.flatMap((v) => (v.type === 'peer' ? [v.hostname] : []));
  return new Set(hosts).size === hosts.length;
}

const validCase: fc.Arbitrary<ValidCase> = fc.record({
  spec: fc.constantFrom(...catalog.list()).chain(validSpec),
  config: fc.record({
    namespaceStrategy: fc.constantFrom('per-owner' as const, 'single' as const),
    minikube: fc.boolean(),
    allowInternet: fc.boolean(),
  }),
  jobId,
});

// ---------------------------------------------------------------------------------------------------------------
// Mutations of JSON-ish trees: drop, replace, retype or add at a random place

type Mutation =
  | { kind: 'delete' | 'retype'; target: number }
  | { kind: 'replace' | 'add'; target: number; key: string; value: Json };

function paths(value: unknown, at: Step[] = [], out: Step[][] = []): Step[][] {
  out.push(at);
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) paths(v, [...at, i], out);
  } else if (isRecord(value)) for (const [k, v] of Object.entries(value)) paths(v, [...at, k], out);
  return out;
}

function retype(value: unknown): unknown {
  if (typeof value === 'string')
    return value.length === 0 ? 0 : Number.isNaN(Number(value)) ? [value] : Number(value);
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return Object.fromEntries(value.map((v, i) => [String(i), v]));
  if (isRecord(value)) return Object.values(value);
  return {};
}

/** Applies mutations to a deep copy; the root may be replaced (or become undefined). */
function mutate(input: unknown, mutations: readonly Mutation[]): unknown {
  let tree = structuredClone(input);
  for (const m of mutations) {
    const all = paths(tree);
    const path = all[m.target % all.length]!;
    const parent = path
      .slice(0, -1)
      .reduce<unknown>((node, step) => (node as Record<Step, unknown>)[step], tree);
    const last = path[path.length - 1];
    const current = last === undefined ? tree : (parent as Record<Step, unknown>)[last];
    let next: unknown;
    switch (m.kind) {
      case 'delete':
        if (last === undefined) tree = undefined;
        else if (Array.isArray(parent)) parent.splice(last as number, 1);
        else delete (parent as Record<Step, unknown>)[last];
        continue;
      case 'retype':
        next = retype(current);
        break;
      // Copies: a generated value is shared between runs, and a later mutation must not make it cyclic.
      case 'replace':
        next = structuredClone(m.value);
        break;
      case 'add':
        if (Array.isArray(current)) current.push(structuredClone(m.value));
        else if (isRecord(current)) setOwn(current, m.key, structuredClone(m.value));
        else next = structuredClone(m.value);
        if (next === undefined) continue;
        break;
    }
    if (last === undefined) tree = next;
    else setOwn(parent as Record<string, unknown>, last, next);
  }
  return tree;
}

function mutations(values: fc.Arbitrary<Json>, keys: fc.Arbitrary<string>): fc.Arbitrary<Mutation[]> {
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({ kind: fc.constantFrom('delete' as const, 'retype' as const), target: fc.nat() }),
    fc.record({
      kind: fc.constantFrom('replace' as const, 'add' as const),
      target: fc.nat(),
      key: keys,
      value: values,
    }),
  );
  return fc.array(mutation, { minLength: 1, maxLength: 4 });
}

// ---------------------------------------------------------------------------------------------------------------
// a. Anything given to prepareJob and planJob

const SPEC_FIELDS = [
  'application',
  'product',
  'name',
  'replicas',
  'parameters',
  'resources',
  'timeAllocation',
  'openedFile',
  'restartOnExit',
  'sshEnabled',
  'allowDuplicateJob',
  'unknownField',
];
const parameterNames = [
  ...new Set(catalog.list().flatMap((r) => r.application.invocation.parameters.map((p) => p.name))),
  'nope',
  '__proto__',
  'constructor',
];
const specValue: fc.Arbitrary<Json> = fc.oneof(
  anyParameterValue,
  filePath,
  anyNumber,
  weirdString,
  fc.integer({ min: -2, max: 1002 }),
  duration,
  fc.record({ hours: anyNumber, minutes: anyNumber, seconds: anyNumber }),
  fc.record({
    name: fc.constantFrom(...catalog.list().map((r) => r.application.metadata.name)),
    version: weirdString,
  }),
  fc.constantFrom(...products).map((p) => ({ id: p.id, category: p.category })),
  fc.jsonValue({ maxDepth: 2 }),
);
const specMutation = fc.oneof(
  mutations(specValue, fc.oneof(fc.constantFrom(...SPEC_FIELDS, ...parameterNames), weirdString)),
  // Targeted: a top-level field or one parameter set to something else.
  fc
    .tuple(fc.constantFrom(...SPEC_FIELDS), specValue)
    .map(([key, value]): Mutation[] => [{ kind: 'add', target: 0, key, value }]),
  fc.tuple(fc.constantFrom(...parameterNames), anyParameterValue).map(([key, value]): Mutation[] => [
    { kind: 'add', target: 0, key: 'parameters', value: {} },
    {
      kind: 'add',
      target: 0,
      key: 'parameters',
      value: Object.defineProperty({}, key, { value, enumerable: true }),
    },
  ]),
);

/** Storage mounts never reach outside the owner's drive (sub-paths of the claim are relative). */
function storageSubPaths(objects: readonly KubernetesObject[]): string[] {
  const job = objects[0] as VolcanoJob;
  return job.spec.tasks.flatMap((t) =>
    t.template.spec.containers.flatMap((c) =>
      (c.volumeMounts ?? []).flatMap((m) => (m.name === 'storage' ? [m.subPath ?? ''] : [])),
    ),
  );
}
const insideAlice = (subPath: string) => subPath === 'home/alice' || subPath.startsWith('home/alice/');

/** Either both refuse with the same ValidationError, or both accept and the plan is valid and contained. */
async function checkAnyInput(specification: unknown): Promise<void> {
  let prepared: unknown;
  try {
    prepared = prepareJob(specification, identity, env);
  } catch (error) {
    assertValidationError(error);
  }
  try {
    const objects = await planJob(specification, identity, env);
    assert.ok(prepared !== undefined, 'planJob accepted what prepareJob refused');
    for (const object of objects) assert.deepEqual(kubernetesObjectProblems(object), [], object.kind);
    for (const subPath of storageSubPaths(objects)) {
      assert.ok(insideAlice(subPath), `mounts ${subPath}, outside /home/alice`);
    }
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    assertValidationError(error);
    assert.equal(prepared, undefined, 'planJob refused what prepareJob accepted');
  }
}

function assertValidationError(error: unknown): void {
  assert.ok(error instanceof ValidationError, `threw ${String(error)}`);
  assert.ok(error.issues.length > 0, 'a ValidationError without issues');
  for (const issue of error.issues) {
    assert.equal(typeof issue.message, 'string');
    assert.ok(issue.message.length > 0, `empty message at ${issue.path}`);
    assert.ok(issue.path.startsWith('specification'), `path ${JSON.stringify(issue.path)}`);
  }
}

describe('a. prepareJob and planJob refuse bad input only with ValidationError', () => {
  test('arbitrary values', async () => {
    const anything = fc.anything({
      maxDepth: 3,
      withBoxedValues: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withBigInt: true,
      withDate: true,
      withTypedArray: true,
      withSparseArray: true,
      stringUnit: 'grapheme',
    });
    await fc.assert(fc.asyncProperty(anything, checkAnyInput), { numRuns: 300 });
  });

  test('arbitrary values in every field of a valid specification', async () => {
    const field = fc.tuple(
      fc.constantFrom(...SPEC_FIELDS),
      fc.anything({ maxDepth: 2, withNullPrototype: true }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...exampleSpecs), field, (spec, [key, value]) =>
        checkAnyInput(mutate(spec, [{ kind: 'add', target: 0, key, value }])),
      ),
      { numRuns: 300 },
    );
  });

  test('mutations of valid specifications: dropped, replaced, retyped and added fields', async () => {
    const base = fc.oneof(
      fc.constantFrom(...exampleSpecs),
      validCase.map((c) => c.spec),
    );
    await fc.assert(
      fc.asyncProperty(base, specMutation, (spec, ms) => checkAnyInput(mutate(spec, ms))),
      { numRuns: 500 },
    );
  });

  test('file paths of every kind, as parameter, resource and opened file', async () => {
    const terminal = {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
    };
    const placed = fc.oneof(
      filePath.map((path) => ({
        ...(exampleSpecs[0] as object),
        parameters: { input: { type: 'file', path } },
      })),
      filePath.map((path) => ({ ...terminal, resources: [{ type: 'file', path }] })),
      filePath.map((openedFile) => ({ ...terminal, openedFile })),
    );
    await fc.assert(fc.asyncProperty(placed, checkAnyInput), { numRuns: 400 });
  });

  test('peers of every kind, as parameter and resource', async () => {
    const peer = fc.record({
      type: fc.constant('peer'),
      hostname: fc.oneof(dnsLabel, weirdString),
      jobId: fc.oneof(jobId, weirdString, fc.string({ unit: 'grapheme', minLength: 41, maxLength: 300 })),
    });
    const check = {
      application: { name: 'http-check', version: '1.0' },
      product: { id: 'u1-gpu-1', category: 'u1-gpu' },
    };
    const placed = fc.oneof(
      peer.map((server) => ({ ...check, parameters: { server } })),
      fc
        .tuple(peer, fc.array(peer, { maxLength: 3 }))
        .map(([server, resources]) => ({ ...check, parameters: { server }, resources })),
    );
    await fc.assert(fc.asyncProperty(placed, checkAnyInput), { numRuns: 300 });
  });
});

// ---------------------------------------------------------------------------------------------------------------
// b. Valid specifications always plan into valid objects

function containersOf(job: VolcanoJob): Container[] {
  return job.spec.tasks.flatMap((t) => [
    ...t.template.spec.containers,
    ...(t.template.spec.initContainers ?? []),
  ]);
}

describe('b. valid specifications plan into valid Kubernetes objects', () => {
  test('every object passes the strict validator, and the job keeps its invariants', async () => {
    await fc.assert(
      fc.asyncProperty(validCase, async ({ spec, config, jobId: id }) => {
        const objects = await planJob(
          spec,
          { ...identity, id },
          { ...env, config: resolvePipelineConfig({ security: ROOT_APPS, ...ANY_TIME, kubernetes: config }) },
        );
        for (const object of objects) {
          assert.deepEqual(kubernetesObjectProblems(object), [], `${object.kind} ${object.metadata.name}`);
        }
        const job = objects[0] as VolcanoJob;
        assert.equal(job.apiVersion, 'batch.volcano.sh/v1alpha1');
        assert.equal(job.kind, 'Job');
        assert.equal(objects.filter((o) => o.kind === 'Job').length, 1);
        const replicas = (spec.replicas as number | undefined) ?? 1;
        assert.equal(job.spec.minAvailable, replicas);
        for (const task of job.spec.tasks) {
          assert.equal(task.replicas, replicas);
          assert.equal(task.minAvailable, replicas);
        }
        for (const container of containersOf(job)) {
          assert.ok(container.resources?.requests, `${container.name} has no requests`);
          assert.deepEqual(container.resources.requests, container.resources.limits, container.name);
        }
        for (const subPath of storageSubPaths(objects)) assert.ok(insideAlice(subPath), subPath);
      }),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------------------
// c. YAML documents into buildCatalog

const exampleFiles = await readCatalogFiles(root('examples/apps'));
const exampleDocs = exampleFiles.map((f) =>
  parseAllDocuments(f.text).map((d) => d.toJS() as Record<string, unknown>),
);

function assertCatalogIssues(issues: readonly CatalogIssue[], files: readonly string[]): void {
  for (const issue of issues) {
    assert.ok(files.includes(issue.file), `issue names file ${issue.file}`);
    assert.ok(Number.isInteger(issue.document) && issue.document >= 1, `document ${issue.document}`);
    assert.equal(typeof issue.message, 'string');
    assert.ok(issue.message.length > 0, `empty message at ${issue.path}`);
    assert.equal(typeof issue.path, 'string');
    if (issue.line !== undefined)
      assert.ok(Number.isInteger(issue.line) && issue.line >= 1, `line ${issue.line}`);
  }
}

function checkText(text: string): void {
  const { catalog: built, issues } = buildCatalog([{ path: 'fuzz.yml', text }]);
  assertCatalogIssues(issues, ['fuzz.yml']);
  assert.ok(Array.isArray(built.list()));
}

const YAML_TOKENS = [
  'application: v1\n',
  'tool: v1\n',
  'name: x\n',
  'version: "1"\n',
  'invocation:\n',
  'parameters:\n',
  '  - ',
  '- ',
  '  ',
  ': ',
  '\n',
  '---\n',
  '...\n',
  '{',
  '}',
  '[',
  ']',
  ',',
  '&a ',
  '*a',
  '&b ',
  '*b',
  '<<: *a\n',
  '!!binary ',
  '!!set ',
  '!!omap ',
  '!!timestamp 2001-12-14\n',
  '%YAML 1.1\n',
  '? ',
  '|\n',
  '>-\n',
  '"',
  "'",
  '#',
  'type: var\n',
  'type: integer\n',
  'defaultValue: ',
  '~',
  'null',
  '0x1F',
  '1e400',
  '.nan',
];

/** "Billion laughs": each level an anchored list of the previous one, `width` times over. */
const aliasBomb = fc
  .tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 10 }), fc.boolean())
  .map(([levels, width, asApplication]) => {
    const lines = [
      asApplication ? 'application: v1' : 'tool: v1',
      `l0: &l0 [${Array(width).fill('x').join(', ')}]`,
    ];
    for (let i = 1; i <= levels; i++) {
      lines.push(
        `l${i}: &l${i} [${Array(width)
          .fill(`*l${i - 1}`)
          .join(', ')}]`,
      );
    }
    return `${lines.join('\n')}\n`;
  });

const BAD_INVOCATION_ITEMS: Json[] = [
  null,
  [],
  [['nested']],
  {},
  { type: 'var' },
  { type: 'var', vars: [] },
  { type: 'var', vars: 'nope' },
  { type: 'var', vars: ['1bad'] },
  { type: 'flag', var: 'nope', flag: '-x' },
  { type: 'flag', var: 'nope' },
  { type: 'env' },
  { type: 'env', var: '' },
  { type: 'word' },
  { type: 'unknown', word: 'x' },
  { type: 42 },
];
const badParameter: fc.Arbitrary<Json> = fc.oneof(
  fc.record({ type: fc.oneof(weirdString, fc.constantFrom('matrix', 'file', 'INTEGER', 'bool')) }),
  fc.record(
    {
      type: fc.constantFrom(
        'input_file',
        'input_directory',
        'text',
        'textarea',
        'integer',
        'floating_point',
        'boolean',
        'enumeration',
        'peer',
        'license_server',
        'ingress',
        'network_ip',
      ),
      optional: fc.oneof(fc.boolean(), weirdString),
      defaultValue: fc.oneof(fc.jsonValue({ maxDepth: 2 }), anyParameterValue, hugeNumber, weirdString),
      min: anyNumber,
      max: anyNumber,
      step: anyNumber,
      options: fc.oneof(
        fc.array(
          fc.record({
            name: fc.oneof(weirdString, fc.integer()),
            value: fc.oneof(weirdString, fc.integer()),
          }),
          {
            maxLength: 3,
          },
        ),
        fc.jsonValue({ maxDepth: 1 }),
      ),
      trueValue: fc.oneof(weirdString, fc.jsonValue({ maxDepth: 1 })),
      tagged: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: ['type'] },
  ),
);
const badDefault: fc.Arbitrary<Json> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  anyParameterValue,
  hugeNumber,
  weirdString,
  fc.record({ type: weirdString, value: fc.jsonValue({ maxDepth: 1 }) }),
);

/** A mutation aimed at an application's invocation, parameters or defaults. */
type DocEdit = (doc: Record<string, unknown>, n: number) => void;
const docEdit: fc.Arbitrary<DocEdit> = fc.oneof(
  fc.constantFrom(...BAD_INVOCATION_ITEMS).map(
    (item): DocEdit =>
      (doc, n) => {
        const list = Array.isArray(doc.invocation) ? doc.invocation : [];
        setOwn(doc, 'invocation', list);
        list.splice(n % (list.length + 1), 0, structuredClone(item));
      },
  ),
  fc.tuple(fc.oneof(fc.constantFrom(...parameterNames), weirdString), badParameter).map(
    ([name, parameter]): DocEdit =>
      (doc) => {
        const parameters = isRecord(doc.parameters) ? doc.parameters : {};
        setOwn(doc, 'parameters', parameters);
        setOwn(parameters, name, structuredClone(parameter));
      },
  ),
  badDefault.map(
    (value): DocEdit =>
      (doc, n) => {
        if (!isRecord(doc.parameters)) return;
        const names = Object.keys(doc.parameters);
        const parameter = doc.parameters[names[n % Math.max(names.length, 1)] ?? ''];
        if (isRecord(parameter)) setOwn(parameter, 'defaultValue', value);
      },
  ),
);

const yamlValue: fc.Arbitrary<Json> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  weirdString,
  anyNumber,
  fc.constantFrom(...BAD_INVOCATION_ITEMS),
  badParameter,
);
const yamlKey = fc.oneof(
  fc.constantFrom(
    'application',
    'tool',
    'name',
    'version',
    'title',
    'invocation',
    'parameters',
    'environment',
    'applicationType',
    'container',
    'web',
    'vnc',
    'defaultValue',
    'type',
    'vars',
    'backend',
    'image',
    'defaultMaxTime',
    'defaultTimeAllocation',
  ),
  weirdString,
);

/** Rebuilds the example files with one document replaced. */
/** The file of one example document, rebuilt with that document replaced, and the tools it needs. */
function withDocument(fileIndex: number, docIndex: number, doc: unknown) {
  const docs = exampleDocs[fileIndex]!.map((d, j) => (j === docIndex ? doc : d));
  const changed = { path: exampleFiles[fileIndex]!.path, text: docs.map((d) => stringify(d)).join('---\n') };
  return fileIndex === toolsFile ? [changed] : [changed, exampleFiles[toolsFile]!];
}
const toolsFile = exampleDocs.findIndex((docs) => docs.every((d) => 'tool' in d && !('application' in d)));
const docChoice = fc
  .tuple(fc.nat(exampleFiles.length - 1), fc.nat())
  .map(([f, d]) => ({ file: f, doc: d % exampleDocs[f]!.length }));

describe('c. buildCatalog returns every problem and never throws', () => {
  const allPaths = exampleFiles.map((f) => f.path);

  test('arbitrary text', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.array(fc.constantFrom(...YAML_TOKENS), { maxLength: 40 }).map((t) => t.join('')),
    );
    fc.assert(fc.property(text, checkText), { numRuns: 300 });
  });

  test('documents that expand aliases past the limit', () => {
    fc.assert(fc.property(aliasBomb, checkText), { numRuns: 40 });
  });

  test('example documents with removed, retyped and added fields', () => {
    fc.assert(
      fc.property(docChoice, mutations(yamlValue, yamlKey), ({ file, doc }, ms) => {
        const files = withDocument(file, doc, mutate(exampleDocs[file]![doc], ms) ?? null);
        assertCatalogIssues(buildCatalog(files).issues, allPaths);
      }),
      { numRuns: 300 },
    );
  });

  test('example applications with bad invocation items, unknown parameter types and bad defaults', () => {
    const apps = exampleDocs.flatMap((docs, file) =>
      docs.flatMap((d, doc) => ('application' in d ? [{ file, doc }] : [])),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...apps),
        fc.array(docEdit, { minLength: 1, maxLength: 3 }),
        fc.nat(),
        ({ file, doc }, edits, n) => {
          const mutated = structuredClone(exampleDocs[file]![doc]!);
          for (const edit of edits) edit(mutated, n);
          const { issues } = buildCatalog(withDocument(file, doc, mutated));
          assertCatalogIssues(issues, allPaths);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('harmless changes (titles, descriptions, application versions) still load', () => {
    // UCloud refuses blank or multi-line titles and versions, so those are not harmless.
    const text = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 30 })
      .filter((s) => /\S/.test(s) && !s.includes('\n'));
    const change = fc.record(
      { title: text, description: fc.string({ unit: 'grapheme', maxLength: 80 }), version: text },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(docChoice, change, ({ file, doc }, edit) => {
        const original = exampleDocs[file]![doc]!;
        const isApp = 'application' in original;
        const changed: Record<string, unknown> = {
          ...original,
          ...edit,
          ...(isApp ? {} : { version: original.version }),
        };
        const { catalog: built, issues } = buildCatalog(withDocument(file, doc, changed));
        assert.deepEqual(issues, []);
        const apps = exampleDocs[file]!.filter((d) => 'application' in d).length;
        assert.equal(built.list().length, apps);
        if (isApp) {
          const found = built.find(String(changed.name), String(changed.version));
          assert.ok(found, `${String(changed.name)}@${String(changed.version)} is not in the catalogue`);
          assert.equal(found.application.metadata.title, changed.title);
        }
      }),
      { numRuns: 200 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------------------
// d. Rendering `var` invocation items

const affix = fc.oneof(fc.constant(''), fc.stringMatching(/^[-=a-z]{1,4}$/));
const varItem: fc.Arbitrary<VariableParameter> = fc.record({
  type: fc.constant('var' as const),
  variableNames: fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'toString', 'constructor'), {
    minLength: 1,
    maxLength: 4,
  }),
  prefixGlobal: affix,
  suffixGlobal: affix,
  prefixVariable: affix,
  suffixVariable: affix,
  isPrefixVariablePartOfArg: fc.boolean(),
  isSuffixVariablePartOfArg: fc.boolean(),
});
const common = (name: string) => ({ name, optional: true, title: name, description: '' });
const renderParameter = (name: string): fc.Arbitrary<ApplicationParameter> =>
  fc.oneof(
    fc.constant<ApplicationParameter>({ ...common(name), type: 'text' as const }),
    fc.constant<ApplicationParameter>({ ...common(name), type: 'integer' as const }),
    fc.constant<ApplicationParameter>({ ...common(name), type: 'input_file' as const }),
    fc.tuple(affix, affix).map(([trueValue, falseValue]) => ({
      ...common(name),
      type: 'boolean' as const,
      trueValue,
      falseValue,
    })),
    fc.constant<ApplicationParameter>({
      ...common(name),
      type: 'enumeration' as const,
      options: [{ name: 'One', value: '1' }],
    }),
  );
const renderValueArb: fc.Arbitrary<AppParameterValue> = fc.oneof(
  fc.record({ type: fc.constant('text' as const), value: fc.string({ maxLength: 5 }) }),
  fc.record({ type: fc.constant('integer' as const), value: fc.integer() }),
  fc.record({ type: fc.constant('boolean' as const), value: fc.boolean() }),
  fc.record({ type: fc.constant('file' as const), path: underAlice }),
  fc.record({ type: fc.constant('peer' as const), hostname: dnsLabel, jobId }),
);

function appWith(item: VariableParameter, parameters: ApplicationParameter[]): Application {
  return {
    metadata: { name: 'render', version: '1', title: 'Render', authors: [], description: '', tags: [] },
    invocation: {
      tool: { name: 't', version: '1' },
      invocation: [item],
      parameters,
      environment: {},
      applicationType: 'BATCH',
      ssh: { mode: 'DISABLED' },
      container: { changeWorkingDirectory: true, runAsRoot: false, runAsRealUser: false },
      allowAdditionalMounts: false,
      allowAdditionalPeers: false,
      allowMultiNode: false,
      fileExtensions: [],
      outputFileGlobs: [],
    },
  };
}

const renderCase = fc
  .record({
    item: varItem,
    parameters: fc.tuple(...['a', 'b', 'c', 'd'].map(renderParameter)),
    values: fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), renderValueArb, { maxKeys: 4 }),
  })
  .map(({ item, parameters, values }) => ({ item, parameters, values: { ...values } }));

/** Whether a variable contributes: it has a value, and a boolean does not map to empty text. */
function contributes(
  name: string,
  parameters: ApplicationParameter[],
  values: Record<string, AppParameterValue>,
) {
  if (!Object.hasOwn(values, name)) return false;
  const value = values[name]!;
  const parameter = parameters.find((p) => p.name === name);
  if (value.type === 'boolean' && parameter?.type === 'boolean') {
    return (value.value ? parameter.trueValue : parameter.falseValue) !== '';
  }
  return true;
}

describe('d. renderCommand of var items', () => {
  test('empty iff no variable has a value; global affixes first and last; predictable arg count', () => {
    fc.assert(
      fc.property(renderCase, ({ item, parameters, values }) => {
        const out = renderCommand(appWith(item, parameters), values);
        const k = item.variableNames.filter((n) => contributes(n, parameters, values)).length;
        assert.equal(out.length === 0, k === 0);
        assert.ok(out.every((arg) => typeof arg === 'string'));
        if (k === 0) return;
        if (item.prefixGlobal !== '') assert.equal(out[0], item.prefixGlobal);
        if (item.suffixGlobal !== '') assert.equal(out[out.length - 1], item.suffixGlobal);
        const separate =
          (item.prefixVariable !== '' && !item.isPrefixVariablePartOfArg ? 1 : 0) +
          (item.suffixVariable !== '' && !item.isSuffixVariablePartOfArg ? 1 : 0);
        const globals = (item.prefixGlobal !== '' ? 1 : 0) + (item.suffixGlobal !== '' ? 1 : 0);
        assert.equal(out.length, globals + k * (1 + separate));
      }),
      { numRuns: 500 },
    );
  });

  test('affixes that are part of the argument wrap each rendered value', () => {
    fc.assert(
      fc.property(renderCase, ({ item, parameters, values }) => {
        const joined = {
          ...item,
          prefixGlobal: '',
          suffixGlobal: '',
          isPrefixVariablePartOfArg: true,
          isSuffixVariablePartOfArg: true,
        };
        const out = renderCommand(appWith(joined, parameters), values);
        for (const arg of out) {
          assert.ok(arg.startsWith(item.prefixVariable) && arg.endsWith(item.suffixVariable), arg);
        }
      }),
      { numRuns: 300 },
    );
  });
});
