import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import {
  buildCatalog,
  type CatalogIssue,
  compareVersions,
  loadCatalog,
  readCatalogFiles,
} from '../src/catalog/catalog.ts';
import { parseProducts } from '../src/catalog/products.ts';
import { ValidationError } from '../src/model/errors.ts';

const tool = (name = 't', version = '1', extra = '') => `tool: v1
name: ${name}
version: "${version}"
title: T
authors: [me]
description: d
container: debian:12
backend: DOCKER
${extra}`;

const app = (extra: string, name = 'app', version = '1') => `application: v1
name: ${name}
version: "${version}"
title: App
authors: [me]
description: d
tool: { name: t, version: "1" }
invocation: [run]
${extra}
`;

function issuesOf(...texts: string[]): CatalogIssue[] {
  return buildCatalog(texts.map((text, i) => ({ path: `f${i}.yml`, text }))).issues;
}

describe('loading', () => {
  test('several documents per file; defaults filled in; numeric names become text', () => {
    const { catalog, issues } = buildCatalog([
      { path: 'a.yml', text: `${tool()}---\n${app('applicationType: WEB')}---\n${app('', 'app', '2')}` },
      { path: 'b.yml', text: tool('other', '1.0').replace('version: "1.0"', 'version: 1.5') },
    ]);
    assert.deepEqual(issues, []);
    assert.deepEqual(catalog.versions('app'), ['1', '2']);
    const web = catalog.find('app', '1')!.application.invocation;
    assert.equal(web.applicationType, 'WEB');
    assert.deepEqual(web.web, { port: 80 });
    assert.equal(web.allowAdditionalMounts, true, 'interactive apps allow extra folders by default');
    const batch = catalog.find('app', '2')!.application.invocation;
    assert.equal(batch.applicationType, 'BATCH');
    assert.equal(batch.allowAdditionalMounts, false);
    assert.deepEqual(batch.container, {
      changeWorkingDirectory: true,
      runAsRoot: false,
      runAsRealUser: false,
    });
    assert.equal(catalog.find('app', '1')!.tool.image, 'debian:12');
  });

  test('the example catalogue loads', async () => {
    const catalog = await loadCatalog('examples/apps');
    assert.deepEqual(
      catalog.list().map((a) => a.application.metadata.name),
      [
        'desktop',
        'file-server',
        'http-check',
        'jupyter',
        'mpi-hello',
        'ssh-server',
        'terminal',
        'word-count',
      ],
    );
  });

  test('a tool may name its image `image` and UDOCKER means DOCKER; other backends are refused', () => {
    const { catalog, issues } = buildCatalog([
      {
        path: 'a.yml',
        text: `${tool().replace('container:', 'image:').replace('DOCKER', 'UDOCKER')}---\n${app('')}`,
      },
    ]);
    assert.deepEqual(issues, []);
    assert.equal(catalog.find('app', '1')!.tool.backend, 'DOCKER');
    const [issue] = issuesOf(tool().replace('backend: DOCKER', 'backend: SINGULARITY'));
    assert.equal(issue?.path, 'backend');
    assert.match(issue!.message, /must be DOCKER/);
  });

  test('versions order numerically', () => {
    assert.ok(compareVersions('1.2.10', '1.2.9') > 0);
    assert.ok(compareVersions('1.0', '1.0.1') < 0);
    assert.equal(compareVersions('2.0', '2.0'), 0);
  });
});

describe('read as UCloud reads', () => {
  test('numbers written where text is expected keep their text: version 1.10 stays "1.10"', () => {
    const { catalog, issues } = buildCatalog([
      {
        path: 'a.yml',
        text: `${tool('t', '1').replace('version: "1"', 'version: 1.10')}---
${app(
  `parameters:
  level:
    type: enumeration
    options: [{ name: 1.50, value: 1.50 }]
    defaultValue: 1.50
`,
  'app',
  '1',
)
  .replace('version: "1"', 'version: 2.10')
  .replace('tool: { name: t, version: "1" }', 'tool: { name: t, version: 1.10 }')
  .replace('invocation: [run]', 'invocation: [run, 0x1F, 1.0e3, true]')}`,
      },
    ]);
    assert.deepEqual(issues, []);
    const found = catalog.find('app', '2.10');
    assert.ok(found, `versions: ${catalog.versions('app')}`);
    assert.equal(found.tool.version, '1.10');
    assert.deepEqual(found.application.invocation.tool, { name: 't', version: '1.10' });
    assert.deepEqual(
      found.application.invocation.invocation.map((i) => (i.type === 'word' ? i.word : i.type)),
      ['run', '0x1F', '1.0e3', 'true'],
    );
    const level = found.application.invocation.parameters[0];
    assert.ok(level?.type === 'enumeration');
    assert.deepEqual(level.options, [{ name: '1.50', value: '1.50' }]);
  });

  test('a single value where a list is expected is a list of one', () => {
    const { catalog, issues } = buildCatalog([
      {
        path: 'a.yml',
        text: `${tool().replace('authors: [me]', 'authors: me')}---
${app('fileExtensions: .txt').replace('authors: [me]', 'authors: Dan').replace('invocation: [run]', 'invocation: run')}`,
      },
    ]);
    assert.deepEqual(issues, []);
    const found = catalog.find('app', '1')!;
    assert.deepEqual(found.tool.authors, ['me']);
    assert.deepEqual(found.application.metadata.authors, ['Dan']);
    assert.deepEqual(found.application.invocation.invocation, [{ type: 'word', word: 'run' }]);
    assert.deepEqual(found.application.invocation.fileExtensions, ['.txt']);
  });

  test('unknown keys anywhere are dropped with a warning naming them; the documents still load', () => {
    const text = `${tool('t', '1', 'defaultTasksPerNode: 1\n')}---
${app(`colour: blue
container: { runAsRoot: false, gpu: true }
parameters:
  port: { type: integer, optional: true, default_value: 6379 }
`).replace('invocation: [run]', 'invocation:\n  - type: var\n    vars: port\n    note: the port')}`;
    const { catalog, issues, warnings } = buildCatalog([{ path: 'a.yml', text }]);
    assert.deepEqual(issues, []);
    const lines = text.split('\n');
    const lineOf = (needle: string) => lines.findIndex((l) => l.includes(needle)) + 1;
    assert.deepEqual(
      warnings.map((w) => [w.document, w.line, w.path]),
      [
        [1, lineOf('defaultTasksPerNode'), 'defaultTasksPerNode'],
        [2, lineOf('note:'), 'invocation[0].note'],
        [2, lineOf('colour'), 'colour'],
        [2, lineOf('gpu'), 'container.gpu'],
        [2, lineOf('default_value'), 'parameters.port.default_value'],
      ],
    );
    assert.match(warnings[4]!.message, /^is not a UCloud YAML v1 field: ignored .*`defaultValue`/);
    const port = catalog.find('app', '1')!.application.invocation.parameters[0];
    assert.equal(port?.defaultValue, undefined, 'default_value is not a default, as in UCloud');
  });

  test('what UCloud accepts: an empty invocation, a tool without description, optional peers', () => {
    const { catalog, issues } = buildCatalog([
      {
        path: 'a.yml',
        text: `${tool().replace('description: d\n', '')}---
${app('parameters:\n  db: { type: peer, optional: true }\n  ip: { type: network_ip, optional: true }\n').replace('invocation: [run]', 'invocation: []')}`,
      },
    ]);
    assert.deepEqual(issues, []);
    const found = catalog.find('app', '1')!;
    assert.equal(found.tool.description, '');
    assert.deepEqual(found.application.invocation.invocation, []);
    assert.deepEqual(
      found.application.invocation.parameters.map((p) => [p.name, p.optional]),
      [
        ['db', true],
        ['ip', true],
      ],
    );
  });

  test('another version gets one problem naming the versions read; a v2 document without invocation names it', () => {
    const v2 = 'application: v2\nname: x\nversion: 1\nsoftware: { type: Container, image: ubuntu }\n';
    const problems = (text: string) => issuesOf(text).map((i) => `${i.path}: ${i.message}`);
    assert.deepEqual(problems(v2.replace('v2', 'v3')), [
      'application: must be v1 (or v2 for an application), not "v3"',
    ]);
    assert.deepEqual(problems(v2), ['invocation: must be a Jinja template (text)']);
  });

  test('what UCloud refuses is refused, naming the field', () => {
    const refused = (text: string) => issuesOf(text).map((i) => `${i.path}: ${i.message}`);
    assert.deepEqual(refused(app('').replace('name: app', 'name: "  "')), [
      'name: must be one line of text, not blank',
    ]);
    assert.deepEqual(refused(app('').replace('title: App', 'title: "two\\nlines"')), [
      'title: must be one line of text, not blank',
    ]);
    assert.deepEqual(refused(app('parameters:\n  _injected_x: { type: text }')), [
      'parameters._injected_x: _injected_x is reserved',
    ]);
    // Read as an own key, not as the prototype of the parameters' map, so the check sees it.
    assert.deepEqual(refused(`${tool()}---\n${app('parameters:\n  __proto__: { type: text }')}`), [
      'parameters.__proto__: __proto__ is reserved',
    ]);
    assert.deepEqual(refused(tool('t', '1', 'requiredModules: [gcc]')), [
      'requiredModules: is only for the NATIVE backend',
    ]);
    assert.deepEqual(refused(app('parameters:\n  n: { type: integer, max: 3, defaultValue: 4 }')), [
      'parameters.n.defaultValue: must be <= 3',
    ]);
    assert.deepEqual(refused(`${tool().replace('backend: DOCKER', 'backend: NATIVE')}---\n${app('')}`), [
      'backend: ucompute runs containers: must be DOCKER, not NATIVE',
      'tool: names tool t@1, whose document was refused',
    ]);
  });
});

describe('problems name file, line, document and field', () => {
  test('every problem of every document is reported', () => {
    const issues = issuesOf(
      `${tool()}---\n${app(`parameters:
  n: { type: integer, min: 5, max: 1 }
  _injected_p: { type: text }
  b: { type: text }
  d: { type: integer, optional: true, defaultValue: "ten" }
  f: { type: input_file, defaultValue: /x }
`).replace(
        'invocation: [run]',
        `invocation:
  - run
  - type: flag
    var: b
    flag: --b
  - type: var
    vars: [n, missing]`,
      )}`,
    );
    const found = issues.map((i) => `${i.file}:${i.line} #${i.document} ${i.path}: ${i.message}`);
    const expect = [
      /^f0\.yml:\d+ #2 parameters\.n\.max: must be >= min \(5\)$/,
      /^f0\.yml:\d+ #2 parameters\._injected_p: _injected_p is reserved$/,
      /^f0\.yml:\d+ #2 parameters\.d\.defaultValue: must be an integer for a integer parameter$/,
      /^f0\.yml:\d+ #2 parameters\.f\.defaultValue: a input_file parameter cannot have a default$/,
      /^f0\.yml:\d+ #2 invocation\[1\]\.var: must name a boolean parameter, b is text$/,
      /^f0\.yml:\d+ #2 invocation\[2\]\.vars\[1\]: names no parameter \(missing\)$/,
    ];
    for (const pattern of expect)
      assert.ok(
        found.some((f) => pattern.test(f)),
        `${pattern} in\n${found.join('\n')}`,
      );
    assert.equal(found.length, expect.length, found.join('\n'));
  });

  test('lines point at the offending field', () => {
    const text = `${tool()}---\n${app('parameters:\n  n: { type: integer, min: 5, max: 1 }\n')}`;
    const [issue] = issuesOf(text);
    const line = text.split('\n').findIndex((l) => l.includes('max: 1')) + 1;
    assert.equal(issue?.line, line);
  });

  test('wrong types and bad enum values are caught by the schema', () => {
    const issues = issuesOf(`${tool()}---\n${app('applicationType: GAME\nallowMultiNode: "yes"\n')}`);
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i.message]));
    assert.match(byPath.applicationType ?? '', /must be one of "BATCH", "VNC", "WEB"/);
    assert.equal(byPath.allowMultiNode, 'must be true or false');
  });

  test('an unknown parameter type and an unknown invocation type are named', () => {
    const issues = issuesOf(
      `${tool()}---\n${app('parameters:\n  x: { type: colour }\n').replace('invocation: [run]', 'invocation:\n  - { type: shell, cmd: ls }')}`,
    );
    const paths = issues.map((i) => `${i.path}: ${i.message}`);
    assert.ok(
      paths.some((p) => p.startsWith('parameters.x.type: must be one of')),
      paths.join('\n'),
    );
  });

  test('an application whose tool is missing, and a duplicate, are errors', () => {
    const orphan = app('', 'orphan').replace('name: t, version: "1"', 'name: gone, version: "1"');
    const issues = issuesOf(orphan, `${tool()}---\n${app('', 'dup')}---\n${app('', 'dup')}`);
    assert.deepEqual(
      issues.map((i) => [i.file, i.document, i.path]),
      [
        ['f0.yml', 1, 'tool'],
        ['f1.yml', 3, 'version'],
      ],
    );
  });

  test('YAML syntax errors and documents of no known kind are reported, not thrown', () => {
    const [syntax] = issuesOf('application: v1\n  bad: [indent');
    assert.equal(syntax?.document, 1);
    assert.ok(syntax?.line !== undefined);
    const [unknown] = issuesOf('kind: Pod\n');
    assert.match(unknown!.message, /application: v1. or .tool: v1/);
  });

  test('loadCatalog throws one ValidationError with every problem', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-catalog-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await mkdir(join(dir, 'nested'));
    await writeFile(
      join(dir, 'nested', 'broken.yaml'),
      `${tool()}---\n${app('applicationType: GAME\nallowMultiNode: 3')}`,
    );
    await writeFile(join(dir, 'ignored.txt'), 'not yaml: [');
    await assert.rejects(loadCatalog(dir), (e: unknown) => {
      assert.ok(e instanceof ValidationError);
      assert.equal(e.issues.length, 2);
      assert.match(e.message, /broken\.yaml:\d+ \(document 2\) allowMultiNode: must be true or false/);
      return true;
    });
  });
  test("a ConfigMap volume's files are read once, through their visible names", async (t) => {
    // Kubernetes' atomic writer: the files in `..<time>/`, `..data` linked to it, each name to `..data/<name>`.
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-catalog-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await mkdir(join(dir, '..2026_11_26_16_00_00.1'));
    await writeFile(join(dir, '..2026_11_26_16_00_00.1', 'word-count.yml'), `${tool()}---\n${app('')}`);
    await symlink('..2026_11_26_16_00_00.1', join(dir, '..data'));
    await symlink(join('..data', 'word-count.yml'), join(dir, 'word-count.yml'));
    const files = await readCatalogFiles(dir);
    assert.deepEqual(
      files.map((f) => f.path),
      [relative(process.cwd(), join(dir, 'word-count.yml'))],
    );
    assert.equal((await loadCatalog(dir)).list().length, 1);
  });
});

describe('products', () => {
  test('a products document is checked field by field', () => {
    assert.throws(
      () =>
        parseProducts('products:\n  - { id: a, category: c, cpu: 0, memoryInGigs: 1, pricePerUnit: 1 }\n'),
      (e: ValidationError) =>
        e.issues.some((i) => i.path === 'products[0].cpu' && i.message === 'must be >= 1'),
    );
    assert.throws(
      () =>
        parseProducts(
          'products:\n  - { id: a, category: c, cpu: 1, memoryInGigs: 1, pricePerUnit: 1 }\n  - { id: a, category: c, cpu: 2, memoryInGigs: 1, pricePerUnit: 1 }\n',
        ),
      /products\[1\]\.id: repeats product a\/c/,
    );
    assert.equal(
      parseProducts('products:\n  - { id: a, category: c, cpu: 1, memoryInGigs: 1, pricePerUnit: 1 }\n')
        .length,
      1,
    );
  });
});
