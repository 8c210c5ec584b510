import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { KubernetesObject, VolcanoJob, VolcanoQueue } from '../src/volcano/api/types.ts';
import { assertExit, type CliResult, runCli, runCliHere } from './support/cli.ts';
import { assertValidKubernetesObject } from './support/kubernetes-schemas.ts';
import { ROOT } from './support/paths.ts';

/**
 * The real `ucompute` command: its main() in this process for what its output and exit code say; a
 * child process where the working folder or the process's own exit status is what is checked.
 */

const WORD_COUNT = join(ROOT, 'examples', 'jobs', 'word-count.json');
const MPI_HELLO = join(ROOT, 'examples', 'jobs', 'mpi-hello.json');

const run = (args: string[]) => runCliHere(args);
const child = (args: string[], cwd = ROOT) => runCli(args, { cwd });

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-cli-'));

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('the command line in this process', () => {
  after(() => rmSync(tmp, { recursive: true, force: true }));

  let fileCount = 0;
  /** Writes a file in the test's temporary folder and returns its path. */
  function temp(name: string, content: string): string {
    const dir = join(tmp, String(fileCount++));
    mkdirSync(dir);
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  }
  const tempJson = (name: string, value: unknown) => temp(name, JSON.stringify(value));

  function parseJsonOutput(result: CliResult): KubernetesObject[] {
    assertExit(result, 0);
    assert.equal(result.stderr, '');
    const objects = JSON.parse(result.stdout) as KubernetesObject[];
    assert.ok(Array.isArray(objects));
    return objects;
  }

  const jobOf = (objects: KubernetesObject[]) => objects[0] as VolcanoJob;
  const userContainer = (objects: KubernetesObject[]) =>
    jobOf(objects).spec.tasks[0]?.template.spec.containers[0];

  describe('plan', () => {
    test('--output json prints the Volcano Job j-<id> first, then its companions', async () => {
      const objects = parseJsonOutput(await run(['plan', WORD_COUNT, '--output', 'json', '--job-id', 'abc']));
      assert.deepEqual(
        objects.map((o) => `${o.kind} ${o.metadata.name}`),
        ['Job j-abc', 'Namespace ucompute-u-local', 'Queue ucompute-u-local', 'NetworkPolicy job-isolation'],
      );
      const job = jobOf(objects);
      assert.equal(job.apiVersion, 'batch.volcano.sh/v1alpha1');
      assert.equal(job.metadata.namespace, 'ucompute-u-local');
      assert.equal(job.metadata.annotations?.['ucompute.dev/max-time-ms'], '1800000');
      assert.deepEqual(userContainer(objects)?.command?.slice(3), [
        'word-count',
        '/work/moby-dick.txt',
        'yes',
        '25',
      ]);
      for (const object of objects) assertValidKubernetesObject(object);
    });

    test('the YAML output (the default) parses to the same objects', async () => {
      const json = parseJsonOutput(await run(['plan', WORD_COUNT, '--output', 'json', '--job-id', 'abc']));
      const yaml = await run(['plan', WORD_COUNT, '--job-id', 'abc']);
      assertExit(yaml, 0);
      assert.equal(yaml.stderr, '');
      // Both readers: the output is YAML 1.1-safe (kubectl) and plain YAML 1.2.
      for (const version of ['1.1', '1.2'] as const) {
        const docs = parseAllDocuments(yaml.stdout, { version });
        assert.ok(Array.isArray(docs));
        for (const doc of docs) {
          assert.deepEqual(doc.errors, []);
          assert.deepEqual(doc.warnings, []);
        }
        assert.deepEqual(
          docs.map((d) => d.toJS()),
          json,
        );
      }
      const explicit = await run(['plan', WORD_COUNT, '--job-id', 'abc', '--output', 'yaml']);
      assert.equal(explicit.stdout, yaml.stdout);
    });

    test('--user and --project choose the owner and so the namespace', async () => {
      const alice = parseJsonOutput(
        await run(['plan', MPI_HELLO, '--user', 'alice', '--output', 'json', '--job-id', 'j1']),
      );
      assert.equal(jobOf(alice).metadata.namespace, 'ucompute-u-alice');
      assert.equal(jobOf(alice).spec.queue, 'ucompute-u-alice');
      assert.equal(jobOf(alice).metadata.annotations?.['ucompute.dev/created-by'], 'alice');
      assert.equal(
        jobOf(alice).metadata.annotations?.['ucompute.dev/output-folder'],
        '/home/alice/Jobs/MPI hello/j1',
      );

      const project = parseJsonOutput(
        await run(['plan', MPI_HELLO, '--user', 'alice', '--project', 'climate', '--output', 'json']),
      );
      assert.equal(jobOf(project).metadata.namespace, 'ucompute-p-climate');
      assert.equal(jobOf(project).metadata.annotations?.['ucompute.dev/project'], 'climate');
      assert.equal(project[1]?.kind, 'Namespace');
      assert.equal(project[1]?.metadata.name, 'ucompute-p-climate');
    });

    test('the owner decides which files a job may use', async () => {
      const result = await run(['plan', WORD_COUNT, '--user', 'alice']);
      assertExit(result, 2);
      assert.match(result.stderr, /specification\.parameters\.input\.path: must lie inside \/home\/alice/);
    });

    test('a generated job id is valid', async () => {
      const objects = parseJsonOutput(await run(['plan', MPI_HELLO, '--output', 'json']));
      assert.match(jobOf(objects).metadata.name, /^j-[a-z0-9]{1,40}$/);
    });

    test('--products replaces the product list', async () => {
      const products = temp(
        'products.yml',
        'products:\n  - { id: big-1, category: big, cpu: 3, memoryInGigs: 5, pricePerUnit: 7 }\n',
      );
      const spec = tempJson('spec.json', {
        application: { name: 'mpi-hello', version: '1.0' },
        product: { id: 'big-1', category: 'big' },
      });
      const objects = parseJsonOutput(await run(['plan', spec, '--products', products, '--output', 'json']));
      const resources = { cpu: '3000m', memory: '5Gi' };
      assert.deepEqual(userContainer(objects)?.resources, { requests: resources, limits: resources });
      assert.equal(jobOf(objects).metadata.annotations?.['ucompute.dev/price-per-unit'], '7');

      const missing = await run(['plan', MPI_HELLO, '--products', products]);
      assertExit(missing, 2);
      assert.match(
        missing.stderr,
        /specification\.product: names no product \(u1-standard-2 in u1-standard\)/,
      );
    });

    test('--apps replaces the catalogue', async () => {
      const apps = temp(
        'hello.yml',
        [
          'tool: v1',
          'name: tiny',
          'version: "1"',
          'title: Tiny',
          'authors: [me]',
          'description: a tiny image',
          'container: registry.example.org/tiny:1',
          'backend: DOCKER',
          '---',
          'application: v1',
          'name: hello',
          'version: "2.0"',
          'title: Hello',
          'authors: [me]',
          'description: says hello',
          'tool: { name: tiny, version: "1" }',
          'invocation: [echo, hello, { type: var, vars: who }]',
          'parameters:',
          '  who: { type: text, optional: true, defaultValue: world }',
        ].join('\n'),
      );
      const dir = join(apps, '..');
      const spec = tempJson('spec.json', {
        application: { name: 'hello', version: '2.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
      });
      const objects = parseJsonOutput(await run(['plan', spec, '--apps', dir, '--output', 'json']));
      assert.equal(userContainer(objects)?.image, 'registry.example.org/tiny:1');
      assert.deepEqual(userContainer(objects)?.command, ['echo', 'hello', 'world']);

      const other = await run(['plan', MPI_HELLO, '--apps', dir]);
      assertExit(other, 2);
      assert.match(
        other.stderr,
        /specification\.application: names no application in the catalogue \(mpi-hello\)/,
      );
    });

    test('--config is read', async () => {
      const config = temp(
        'config.yml',
        [
          'prefix: lab',
          'kubernetes:',
          '  namespaceStrategy: single',
          '  namespace: batch',
          '  queue: research',
          '  minikube: true',
          '  storageClaim: cephfs',
        ].join('\n'),
      );
      const spec = tempJson('spec.json', {
        application: { name: 'file-server', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
      });
      const objects = parseJsonOutput(
        await run(['plan', spec, '--config', config, '--output', 'json', '--job-id', 'web1']),
      );
      assert.deepEqual(
        objects.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`),
        ['Job batch/j-web1', 'Service batch/j-web1-mk', 'NetworkPolicy batch/job-isolation'],
      );
      assert.equal(jobOf(objects).spec.queue, 'research');
      assert.deepEqual(jobOf(objects).spec.tasks[0]?.template.spec.volumes?.[0], {
        name: 'storage',
        persistentVolumeClaim: { claimName: 'cephfs' },
      });

      const perOwner = temp('config.yml', 'prefix: lab\nfairShare: { weights: { "user:local": 5 } }\n');
      const owned = parseJsonOutput(await run(['plan', spec, '--config', perOwner, '--output', 'json']));
      assert.equal(jobOf(owned).metadata.namespace, 'lab-u-local');
      assert.equal(owned[2]?.kind, 'Queue');
      assert.equal((owned[2] as VolcanoQueue).spec.weight, 5);
    });

    // Independent child processes: a few at a time keeps this quick without loading the machine.
    describe('bad input exits 2 and names the field', { concurrency: 4 }, () => {
      const spec = (value: unknown) => tempJson('spec.json', value);
      const wordCount = (extra: Record<string, unknown>) => ({
        application: { name: 'word-count', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: { input: { type: 'file', path: '/home/local/a.txt' } },
        ...extra,
      });
      const cases: [string, () => string[], RegExp][] = [
        [
          'unknown application',
          () => ['plan', spec(wordCount({ application: { name: 'nope', version: '1.0' } }))],
          /^error: specification\.application: names no application in the catalogue \(nope\)$/m,
        ],
        [
          'unknown application version',
          () => ['plan', spec(wordCount({ application: { name: 'word-count', version: '9.9' } }))],
          /^error: specification\.application: word-count has no version 9\.9 \(there is 1\.0\)$/m,
        ],
        [
          'bad parameter value',
          () => [
            'plan',
            spec(
              wordCount({
                parameters: {
                  input: { type: 'file', path: '/home/local/a.txt' },
                  top: { type: 'integer', value: 0 },
                },
              }),
            ),
          ],
          /^error: specification\.parameters\.top\.value: must be >= 1$/m,
        ],
        [
          'wrong parameter type',
          () => [
            'plan',
            spec(
              wordCount({
                parameters: {
                  input: { type: 'file', path: '/home/local/a.txt' },
                  top: { type: 'text', value: 'x' },
                },
              }),
            ),
          ],
          /^error: specification\.parameters\.top\.type: must be integer for a integer parameter$/m,
        ],
        [
          'missing mandatory parameter',
          () => ['plan', spec(wordCount({ parameters: {} }))],
          /^error: specification\.parameters\.input: is required \(Text file\)$/m,
        ],
        [
          'unknown field in the specification',
          () => ['plan', spec(wordCount({ bogus: 1 }))],
          /^error: specification\.bogus: is not a known field$/m,
        ],
        [
          'unknown product',
          () => ['plan', spec(wordCount({ product: { id: 'u9', category: 'u1-standard' } }))],
          /^error: specification\.product: names no product \(u9 in u1-standard\)$/m,
        ],
        [
          'invalid JSON',
          () => {
            const path = temp('broken.json', '{"application": ');
            return ['plan', path];
          },
          /^error: .*broken\.json: is not valid JSON/m,
        ],
        [
          'missing spec file',
          () => ['plan', join(tmp, 'missing.json')],
          /^error: no such file: .*missing\.json$/m,
        ],
        [
          'missing --config file',
          () => ['plan', MPI_HELLO, '--config', join(tmp, 'nope.yml')],
          /no such file: .*nope\.yml/,
        ],
        [
          'bad --output',
          () => ['plan', MPI_HELLO, '--output', 'xml'],
          /^error: --output must be yaml or json$/m,
        ],
        ['bad --job-id', () => ['plan', MPI_HELLO, '--job-id', 'ABC!'], /^error: --job-id: ABC! must be/m],
        ['bad --user', () => ['plan', MPI_HELLO, '--user', 'Not A User'], /^error: --user: /m],
        ['bad --project', () => ['plan', MPI_HELLO, '--project=Climate!'], /^error: --project: /m],
        [
          'invalid config field',
          () => [
            'plan',
            MPI_HELLO,
            '--config',
            temp('c.yml', 'kubernetes:\n  namespaceStrategy: sometimes\n'),
          ],
          /^error: \S+c\.yml: kubernetes\.namespaceStrategy: must be one of "per-owner", "single"$/m,
        ],
        [
          'unknown config field',
          () => ['plan', MPI_HELLO, '--config', temp('c.yml', 'kubernetes:\n  namespaces: x\n')],
          /^error: \S+c\.yml: kubernetes\.namespaces: is not a known field$/m,
        ],
        [
          'invalid products file',
          () => [
            'plan',
            MPI_HELLO,
            '--products',
            temp('p.yml', 'products:\n  - { id: x, category: y, cpu: 0 }\n'),
          ],
          /^error: \S+p\.yml: products\[0\]\.cpu: must be >= 1$/m,
        ],
        ['unknown option', () => ['plan', MPI_HELLO, '--frobnicate'], /^error: .*--frobnicate/m],
        ['no specification', () => ['plan'], /^error: plan takes one SPEC\.json/m],
      ];
      for (const [name, args, expected] of cases) {
        test(name, async () => {
          const result = await run(args());
          assertExit(result, 2);
          assert.equal(result.stdout, '');
          assert.match(result.stderr, expected);
        });
      }
    });
  });

  describe('apps validate', () => {
    test('the example catalogue is valid', async () => {
      const result = await run(['apps', 'validate', join(ROOT, 'examples', 'apps')]);
      assertExit(result, 0);
      assert.equal(result.stdout, '8 applications in 9 files: all valid\n');
      assert.equal(result.stderr, '');
    });

    test('lists file, line, document and field for every problem, and exits 1', async () => {
      const dir = join(tmp, 'broken-catalogue');
      mkdirSync(join(dir, 'sub'), { recursive: true });
      const apps = [
        'tool: v1',
        'name: t',
        'version: "1"',
        'title: T',
        'authors: [me]',
        'description: a tool',
        'container: busybox',
        'backend: DOCKER',
        '---',
        'application: v1',
        'name: good',
        'version: "1.0"',
        'title: Good',
        'authors: [me]',
        'description: fine',
        'tool: { name: t, version: "1" }',
        'invocation: [echo, hi]',
        '---',
        'application: v1',
        'name: bad',
        'version: "1.0"',
        'title: Bad',
        'authors: [me]',
        'description: broken',
        'tool: { name: t, version: "1" }',
        'applicationType: SOMETIMES',
        'invocation: [echo]',
        '---',
        'application: v1',
        'name: bad2',
        'version: "1.0"',
        'title: Bad 2',
        'authors: [me]',
        'description: broken',
        'tool: { name: t, version: "1" }',
        'invocation:',
        '  - echo',
        '  - type: var',
        '    vars: missing',
        'parameters:',
        '  count:',
        '    type: integer',
        '    min: 5',
        '    max: 1',
      ];
      const orphan = [
        'application: v1',
        'name: orphan',
        'version: "1.0"',
        'title: Orphan',
        'authors: [me]',
        'description: no tool',
        'tool: { name: ghost, version: "9" }',
        'invocation: ["true"]',
      ];
      writeFileSync(join(dir, 'apps.yml'), `${apps.join('\n')}\n`);
      writeFileSync(join(dir, 'sub', 'orphan.yml'), `${orphan.join('\n')}\n`);
      writeFileSync(join(dir, 'sub', 'syntax.yaml'), 'application: v1\nname: [unclosed\n');
      const line = (lines: string[], text: string) => lines.indexOf(text) + 1;

      const result = await child(['apps', 'validate', '.'], dir);
      assertExit(result, 1);
      assert.equal(result.stdout, '');
      const reported = result.stderr.trimEnd().split('\n');
      assert.equal(reported.pop(), '5 problems in 3 files');
      // Sorted: the order of problems within a document is not part of the contract.
      const expected = [
        `apps.yml:${line(apps, 'applicationType: SOMETIMES')} (document 3) applicationType: must be one of "BATCH", "VNC", "WEB"`,
        `apps.yml:${line(apps, '    max: 1')} (document 4) parameters.count.max: must be >= min (5)`,
        `apps.yml:${line(apps, '    vars: missing')} (document 4) invocation[1].vars: names no parameter (missing)`,
        `sub/orphan.yml:${line(orphan, 'tool: { name: ghost, version: "9" }')} (document 1) tool: names no tool in the catalogue (ghost@9)`,
        'sub/syntax.yaml:3 (document 1) (document): Flow sequence in block collection must be sufficiently indented and end with a ]',
      ];
      assert.deepEqual(reported.sort(), expected.sort());
    });
  });

  describe('the command line', () => {
    test('--help exits 0 with the usage', async () => {
      const result = await run(['--help']);
      assertExit(result, 0);
      assert.match(result.stdout, /^Usage: ucompute COMMAND/m);
      assert.match(result.stdout, /plan SPEC\.json/);
      assert.match(result.stdout, /apps validate DIR/);
    });

    test('each command has --help', async () => {
      const plan = await run(['plan', '--help']);
      assertExit(plan, 0);
      assert.match(plan.stdout, /^Usage: ucompute plan SPEC\.json/m);
      const validate = await run(['apps', 'validate', '--help']);
      assertExit(validate, 0);
      assert.match(validate.stdout, /^Usage: ucompute apps validate DIR/m);
    });

    test('an unknown command exits 2', async () => {
      const result = await child(['frobnicate']);
      assertExit(result, 2);
      assert.match(result.stderr, /^error: unknown command "frobnicate"$/m);
    });

    test('a mistyped command names the nearest one', async () => {
      const result = await run(['lgos', '123']);
      assertExit(result, 2);
      assert.match(result.stderr, /^error: unknown command "lgos" \(did you mean "logs"\?\)$/m);
    });

    test('no command, or apps without validate, exits 2 with the usage', async () => {
      const none = await run([]);
      assertExit(none, 2);
      assert.match(none.stdout, /^Usage: ucompute COMMAND/m);
      const apps = await run(['apps', 'check']);
      assertExit(apps, 2);
      assert.match(apps.stderr, /^Usage: ucompute apps validate DIR/m);
    });
  });
});
