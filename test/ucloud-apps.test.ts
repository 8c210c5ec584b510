import assert from 'node:assert/strict';
import { relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { buildCatalog, readCatalogFiles } from '../src/catalog/catalog.ts';
import { planJob } from '../src/jobs/plan.ts';
import { createJobService } from '../src/jobs/service.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import type { AppParameterValue } from '../src/model/parameter-value.ts';
import { runCliHere } from './support/cli.ts';
import { CREATED_AT, JOB_ID, products } from './support/fixtures.ts';
import { assertValidKubernetesObject } from './support/kubernetes-schemas.ts';
import { openTestStore } from './support/store.ts';

/**
 * UCloud's own example applications and tools (test/fixtures/ucloud-apps, copied from UCloud's
 * repository; see the README there) load, validate and plan as UCloud accepts them, and the ones
 * ucompute cannot run are refused naming the field. The expected outcome of every file is below.
 */

const FIXTURES = fileURLToPath(new URL('./fixtures/ucloud-apps', import.meta.url));
const files = (await readCatalogFiles(FIXTURES)).map((f) => ({ ...f, path: relative(FIXTURES, f.path) }));
const { catalog, issues, warnings } = buildCatalog(files);

interface Outcome {
  /** name@version of what the file defines and the catalogue keeps. */
  loads?: string[];
  /** `path: message` of each problem; the file's documents are not in the catalogue. */
  refused?: string[];
  /** Paths of what is ignored with a warning, as UCloud ignores it. */
  ignored?: string[];
}

const IGNORED_TASKS = ['defaultTasksPerNode'];
const OUTCOMES: Record<string, Outcome> = {
  'app-store-examples-2026/all-app.yml': { loads: ['all@4'] },
  'app-store-examples-2026/all-app-opt.yml': { loads: ['all-opt@5'] },
  'app-store-examples-2026/all-tool.yml': { loads: ['all@1'], ignored: IGNORED_TASKS },
  'app-store-examples-2026/alpine-app.yml': { loads: ['alpine@3'] },
  'app-store-examples-2026/alpine-tool.yml': { loads: ['alpine@1'], ignored: IGNORED_TASKS },
  'app-store-examples-2026/input-file-app.yml': { loads: ['file@1'] },
  'app-store-examples-2026/ssh-app.yml': { loads: ['ssh@optional'] },
  'app-store-examples-2026/ssh-mandatory-app.yml': { loads: ['ssh@mandatory'] },
  'app-store-examples-2026/ssh-tool.yml': { loads: ['ssh@1'], ignored: IGNORED_TASKS },
  // Tools for Slurm (NATIVE) and OpenStack (VIRTUAL_MACHINE) providers: nothing ucompute can run.
  'app-store-examples-2026/slurm-tool-poc.yml': {
    refused: ['backend: ucompute runs containers: must be DOCKER, not NATIVE'],
  },
  'app-store-examples-2026/slurm-app-poc.yml': {
    refused: ['tool: names tool slurm-tool@1, whose document was refused'],
  },
  'app-store-examples-2026/slurm-app-web-poc.yml': {
    refused: ['tool: names tool slurm-tool@1, whose document was refused'],
  },
  'app-store-examples-2026/vm-tool.yml': {
    refused: ['backend: ucompute runs containers: must be DOCKER, not VIRTUAL_MACHINE'],
  },
  'app-store-examples-2026/vm-app.yml': {
    refused: ['tool: names tool aau-ubuntu-vm@20.04, whose document was refused'],
  },
  'app-store-examples-2023/all-app-opt.yml': { loads: ['all-opt@4'] },
  'app-store-examples-2023/slurm-app-poc.yml': { loads: ['dtu-slurm-poc@1.6'] },
  'app-store-examples-2023/slurm-tool-poc.yml': { loads: ['dtu-slurm-poc-tool@4'] },
  'app-store-examples-2023/slurm/jupyter-tool.yml': {
    refused: ['backend: ucompute runs containers: must be DOCKER, not NATIVE'],
    ignored: IGNORED_TASKS,
  },
  'app-store-examples-2023/slurm/jupyter-app.yml': {
    refused: ['tool: names tool jupyterlab-hippo@3.1.6, whose document was refused'],
  },
  'integrated-applications/syncthing/app.yml': { loads: ['syncthing@1'] },
  'integrated-applications/syncthing/tool.yml': { loads: ['syncthing@1'], ignored: IGNORED_TASKS },
  'core2-test-yaml/legacy_chatui.yaml': { loads: ['chat-ui@0.6.9'] },
  'core2-test-yaml/legacy_mongodb.yaml': { loads: ['mongodb@8.0.9'] },
  'core2-test-yaml/legacy_redis.yaml': {
    loads: ['redis@8.2.0'],
    ignored: ['parameters.server_port.default_value'],
  },
  // application: v2 (core2's A2Yaml): its own tool; Native software refused.
  'core2-test-yaml/v2_terminal.yaml': { loads: ['terminal-ubuntu@Aug2025-1'], ignored: ['modules'] },
  'core2-test-yaml/generic-container.yml': { loads: ['generic-container@1'] },
  'im2-docs-k8s/app_example.yaml': { loads: ['example-application@2026.1.0'] },
  'im2-docs-k8s/app_customize.yaml': {
    refused: [
      'software.type: is NATIVE: ucompute runs containers, not software loaded on the host (modules)',
    ],
  },
  ...Object.fromEntries(
    ['app_minimal', 'app_configuration', 'app_injection'].map((name) => [
      `im2-docs-k8s/${name}.yaml`,
      {
        refused: [
          `software.type: is NATIVE: ucompute runs containers, not software loaded on the host (modules)`,
        ],
      },
    ]),
  ),
  'written-for-ucompute/core2-tools.yml': { loads: ['chat-ui@0.6.9', 'mongodb@8.0.9', 'redis@8.2.0'] },
  'written-for-ucompute/refused-by-ucloud.yml': {
    refused: [
      'parameters.enumeration.defaultValue: must be one of the options (a, b) for a enumeration parameter',
      'invocation[1].vars: names no parameter (missing)',
      'parameters.file.defaultValue: a input_file parameter cannot have a default',
      'parameters.integer.max: must be >= min (5)',
      'parameters.floating_point.defaultValue: must be <= 1.5',
      'applicationType: must be one of "BATCH", "VNC", "WEB"',
      'web: is only for applicationType WEB',
      'parameters._injected_token: _injected_token is reserved',
      'authors: must have at least 1 items',
      'name: must be one line of text, not blank',
      'backend: is required',
      'requiredModules: is only for the NATIVE backend',
    ],
  },
};

test('every fixture file has an expected outcome', () => {
  assert.deepEqual(files.map((f) => f.path).sort(), Object.keys(OUTCOMES).sort());
});

describe('each file loads, or is refused naming the field', () => {
  const apps = new Set(
    catalog.list().map((r) => `${r.application.metadata.name}@${r.application.metadata.version}`),
  );
  const tools = new Set(catalog.list().map((r) => `${r.tool.name}@${r.tool.version}`));
  for (const [file, outcome] of Object.entries(OUTCOMES)) {
    test(file, () => {
      const text = files.find((f) => f.path === file)?.text ?? '';
      assert.deepEqual(
        issues.filter((i) => i.file === file).map((i) => `${i.path}: ${i.message}`),
        outcome.refused ?? [],
      );
      assert.deepEqual(
        warnings.filter((w) => w.file === file).map((w) => w.path),
        outcome.ignored ?? [],
      );
      for (const ref of outcome.loads ?? []) {
        const kind = /^application: v[12]/m.test(text) ? apps : tools;
        assert.ok(kind.has(ref), `${ref} is in the catalogue`);
      }
    });
  }
});

test('versions are kept as written: 1.6 and 20.04 are not numbers', () => {
  assert.ok(catalog.find('dtu-slurm-poc', '1.6'));
  assert.deepEqual(catalog.find('dtu-slurm-poc', '1.6')?.application.invocation.tool, {
    name: 'dtu-slurm-poc-tool',
    version: '4',
  });
  assert.ok(issues.some((i) => i.message.includes('aau-ubuntu-vm@20.04')));
});

test('what UCloud reads is read: words from numbers, wrapped defaults, optional peers', () => {
  const chat = catalog.find('chat-ui', '0.6.9')!.application.invocation;
  assert.deepEqual(chat.invocation.slice(0, 5), [
    { type: 'word', word: '/sbin/tini' },
    { type: 'word', word: '--' },
    { type: 'word', word: 'start_app' },
    { type: 'word', word: '-p' },
    { type: 'word', word: '3000' },
  ]);
  const whisper = chat.parameters.find((p) => p.name === 'whisper_model');
  assert.deepEqual(whisper?.defaultValue, { type: 'text', value: 'large' });
  const mongoPort = catalog
    .find('mongodb', '8.0.9')!
    .application.invocation.parameters.find((p) => p.name === 'mongo_port');
  assert.deepEqual(mongoPort?.defaultValue, { type: 'integer', value: 27017 });
  const peers = catalog.find('all', '4')!.application.invocation.parameters.filter((p) => p.type === 'peer');
  assert.deepEqual(
    peers.map((p) => [p.name, p.optional]),
    [
      ['peer', true],
      ['peeropt', true],
    ],
  );
  const slurm = catalog.find('dtu-slurm-poc', '1.6')!.application.invocation;
  assert.deepEqual(slurm.invocation, []);
});

/** What each loaded application needs to be submitted: its mandatory parameters. */
const FILE: AppParameterValue = { type: 'file', path: '/home/alice/data/input.txt', readOnly: true };
const FOLDER: AppParameterValue = { type: 'file', path: '/home/alice/data' };
const PARAMETERS: Record<string, Record<string, AppParameterValue>> = {
  'all@4': {
    file: FILE,
    directory: FOLDER,
    text: { type: 'text', value: 'hello' },
    integer: { type: 'integer', value: 3 },
    boolean: { type: 'boolean', value: true },
    floating_point: { type: 'floating_point', value: 0.5 },
    license_server: { type: 'license_server', id: 'matlab' },
    enumeration: { type: 'text', value: 'b' },
  },
  'all-opt@4': {},
  'all-opt@5': {},
  'alpine@3': {},
  'file@1': { file: FILE },
  'ssh@optional': {},
  'ssh@mandatory': {},
  'dtu-slurm-poc@1.6': { file_content: { type: 'textarea', value: '#!/bin/sh\necho hi\n' } },
  'syncthing@1': { stateFolder: FOLDER },
  'chat-ui@0.6.9': { data_dir: FOLDER },
  'mongodb@8.0.9': { mongo_data: FOLDER },
  'redis@8.2.0': {},
  'example-application@2026.1.0': {},
  'terminal-ubuntu@Aug2025-1': {},
  'generic-container@1': { wf: { type: 'workflow', specification: { job: 'sleep inf', inputs: [] } } },
};

describe('each loaded application plans into valid Kubernetes objects', () => {
  const config = resolvePipelineConfig({
    licenseServers: [{ id: 'matlab', address: 'license.example.org', port: 27000, tags: ['app'] }],
    // Many of UCloud's apps run as root (runAsRoot): planned here for an operator who allows it.
    security: { allowRootApps: true },
  });
  test('the plans cover every loaded application', () => {
    assert.deepEqual(
      catalog
        .list()
        .map((r) => `${r.application.metadata.name}@${r.application.metadata.version}`)
        .sort(),
      Object.keys(PARAMETERS).sort(),
    );
  });
  for (const resolved of catalog.list()) {
    const { name, version } = resolved.application.metadata;
    test(`${name}@${version}`, async () => {
      const specification = {
        application: { name, version },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: PARAMETERS[`${name}@${version}`],
      };
      const objects = await planJob(
        specification,
        { id: JOB_ID, owner: { createdBy: 'alice' }, createdAt: CREATED_AT },
        { catalog, products, config },
      );
      assert.equal(objects[0]?.kind, 'Job');
      for (const object of objects) assertValidKubernetesObject(object);
    });
  }
});

test('apps validate prints a warning line per ignored field and the refusals, and exits 1', async () => {
  const result = await runCliHere(['apps', 'validate', FIXTURES]);
  assert.equal(result.code, 1);
  const lines = result.stderr.trimEnd().split('\n');
  assert.equal(lines.filter((l) => / warning: /.test(l)).length, warnings.length);
  assert.ok(
    lines.some((l) =>
      /core2-test-yaml\/legacy_redis\.yaml:\d+ \(document 1\) warning: parameters\.server_port\.default_value: is not a UCloud YAML v1 field: ignored/.test(
        l,
      ),
    ),
    result.stderr,
  );
  assert.equal(
    lines.at(-1),
    `${issues.length} problems in ${files.length} files (${warnings.length} warnings)`,
  );
});

test("core2's v2 terminal runs its Jinja script per rank", async () => {
  const config = resolvePipelineConfig({ security: { allowRootApps: true } });
  const plan = (parameters: Record<string, AppParameterValue>) =>
    planJob(
      {
        application: { name: 'terminal-ubuntu', version: 'Aug2025-1' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        replicas: 2,
        parameters,
      },
      { id: JOB_ID, owner: { createdBy: 'alice' }, createdAt: CREATED_AT },
      { catalog, products, config },
    );
  const [job] = await plan({ shell: { type: 'text', value: 'zsh' } });
  const container = (
    job as unknown as { spec: { tasks: { template: { spec: { containers: { command: string[] }[] } } }[] } }
  ).spec.tasks[0]!.template.spec.containers[0]!;
  const [shell, flag, script] = container.command;
  assert.deepEqual([shell, flag], ['bash', '-c']);
  // The ranks differ (RANK=…), so each runs its own script.
  assert.match(script!, /^case "\$\$VC_TASK_INDEX" in\n0\) exec bash -c '/);
  assert.match(script!, /RANK=0/);
  assert.match(script!, /RANK=1/);
  assert.match(script!, new RegExp(`CORES=${products.find((p) => p.id === 'u1-standard-1')!.cpu}\\b`));
});

test("a Workflow parameter: the user's job script runs after the application's, with its own inputs", async () => {
  const config = resolvePipelineConfig({ security: { allowRootApps: true } });
  const workflow = (job: string, inputs: unknown[] = []) => ({
    type: 'workflow' as const,
    specification: { applicationName: 'generic-container', language: 'jinja2', job, inputs },
  });
  const plan = (parameters: Record<string, AppParameterValue>) =>
    planJob(
      {
        application: { name: 'generic-container', version: '1' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters,
      },
      { id: JOB_ID, owner: { createdBy: 'alice' }, createdAt: CREATED_AT },
      { catalog, products, config },
    );
  const greeting = { name: 'greeting', type: 'text', title: 'Greeting', optional: false, defaultValue: null };
  const [job] = await plan({
    wf: workflow('echo {{ greeting }} on rank {{ ucloud.rank }}', [greeting]),
    greeting: { type: 'text', value: "it's me" },
  });
  const container = (
    job as unknown as { spec: { tasks: { template: { spec: { containers: { command: string[] }[] } } }[] } }
  ).spec.tasks[0]!.template.spec.containers[0]!;
  assert.deepEqual(container.command, ['bash', '-c', `echo 'it'"'"'s me' on rank 0`]);

  const issuesOf = (parameters: Record<string, AppParameterValue>) =>
    plan(parameters).then(
      () => [],
      (e: unknown) => {
        assert.ok(e instanceof ValidationError, String(e));
        return e.issues.map((i) => `${i.path}: ${i.message}`);
      },
    );
  assert.deepEqual(await issuesOf({}), ['specification.parameters.wf: is required (Workflow)']);
  assert.deepEqual(await issuesOf({ wf: workflow('echo {{ greeting }}', [greeting]) }), [
    'specification.parameters.greeting: is required (Greeting)',
  ]);
  assert.deepEqual(await issuesOf({ wf: workflow('echo', [{ name: 'x', type: 'private_network' }]) }), [
    'specification.parameters.wf.specification.inputs[0].type: private_network parameters are not offered by ucompute',
  ]);
  assert.deepEqual(await issuesOf({ greeting: { type: 'text', value: 'hi' }, wf: workflow('echo') }), [
    'specification.parameters.greeting: is not a parameter of generic-container',
  ]);
  const [broken] = await issuesOf({ wf: workflow('{{ dynamicInterface(0, "WEB", "x", 80) }}') });
  assert.match(
    broken!,
    /^specification\.application: generic-container's invocation does not render for this job: .*dynamicInterface/,
  );
});

test('a Jinja invocation that does not render is refused when the job is created, naming it; nothing is created', async () => {
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const service = createJobService({
    store,
    env: { catalog, products, config: resolvePipelineConfig({ security: { allowRootApps: true } }) },
    backend: dryBackend({ runForMs: null }),
    requireCredits: false,
  });
  const terminal = (parameters: Record<string, AppParameterValue>) => ({
    application: { name: 'terminal-ubuntu', version: 'Aug2025-1' },
    product: { id: 'u1-standard-1', category: 'u1-standard' },
    parameters,
  });
  const alice = { username: 'alice', admin: false };
  // numWeb > 1 asks the template for dynamicInterface, which ucompute does not offer.
  const refused = await service
    .create(alice, [terminal({}), terminal({ numWeb: { type: 'integer', value: 2 } })])
    .then(
      () => assert.fail('created'),
      (e: unknown) => e,
    );
  assert.ok(refused instanceof ValidationError, String(refused));
  assert.deepEqual(
    refused.issues.map((i) => i.path),
    ['items[1].specification.application'],
  );
  assert.match(
    refused.issues[0]!.message,
    /^terminal-ubuntu's invocation does not render for this job: .*dynamicInterface: .*extra interfaces are not offered/,
  );
  assert.deepEqual(await store.jobs.active(), []);
  const [created] = await service.create(alice, [terminal({})]);
  assert.equal((await store.jobs.get(created!))?.id, created);
});
