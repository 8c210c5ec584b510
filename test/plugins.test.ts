import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { buildJob } from '../src/jobs/job-management.ts';
import { type PipelineConfig, resolvePipelineConfig } from '../src/model/config.ts';
import { fileMountPlugin } from '../src/plugins/file-mount.ts';
import { fileOutputPlugin } from '../src/plugins/file-output.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import type { JobBuild, JobPlugin, PeerLocation } from '../src/plugins/plugin.ts';
import { taskPlugin } from '../src/plugins/task.ts';
import type { JobStorage } from '../src/storage/job-storage.ts';
import type {
  Companion,
  Container,
  NetworkPolicy,
  PodSpec,
  Service,
  TaskSpec,
  VolcanoQueue,
} from '../src/volcano/api/types.ts';
import { svcData } from '../src/volcano/emulation/conventions.ts';
import { PIDS_LIMIT_ANNOTATION } from '../src/volcano/labels.ts';
import { build, catalog, config, JOB_ID, prepare } from './support/fixtures.ts';
import { assertValidKubernetesObject } from './support/kubernetes-schemas.ts';

// Specifications of the example applications; `with` adds or replaces top-level fields.

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const STANDARD_2 = { id: 'u1-standard-2', category: 'u1-standard' };
const STANDARD_8 = { id: 'u1-standard-8', category: 'u1-standard' };
const GPU_1 = { id: 'u1-gpu-1', category: 'u1-gpu' };
const SECURE_2 = { id: 'u1-secure-2', category: 'u1-secure' };

const wordCount = (extra: Record<string, unknown> = {}) => ({
  application: { name: 'word-count', version: '1.0' },
  product: STANDARD_1,
  parameters: { input: { type: 'file', path: '/home/alice/books/moby.txt', readOnly: true } },
  ...extra,
});
const app = (name: string, extra: Record<string, unknown> = {}) => ({
  application: { name, version: '1.0' },
  product: STANDARD_1,
  ...extra,
});
const httpCheck = (extra: Record<string, unknown> = {}) =>
  app('http-check', {
    parameters: { server: { type: 'peer', hostname: 'server', jobId: 'peer1' } },
    ...extra,
  });

const JOB_NAME = `j-${JOB_ID}`;
const OWN_PODS = { podSelector: { matchLabels: { 'volcano.sh/job-name': JOB_NAME } } };

function task(b: JobBuild): TaskSpec {
  assert.equal(b.volcanoJob.spec.tasks.length, 1);
  return b.volcanoJob.spec.tasks[0]!;
}
function pod(b: JobBuild): PodSpec {
  return task(b).template.spec;
}
function container(b: JobBuild): Container {
  assert.equal(pod(b).containers.length, 1);
  return pod(b).containers[0]!;
}
function annotations(b: JobBuild): Record<string, string> {
  return b.volcanoJob.metadata.annotations ?? {};
}
function companions<K extends Companion['kind']>(b: JobBuild, kind: K): Extract<Companion, { kind: K }>[] {
  return b.companions.filter((c): c is Extract<Companion, { kind: K }> => c.kind === kind);
}
/** The job's own NetworkPolicy `policy-<id>`, if the build has one. */
function jobPolicy(b: JobBuild): NetworkPolicy | undefined {
  return companions(b, 'NetworkPolicy').find((p) => p.metadata.name === `policy-${JOB_ID}`);
}
/** The isolation policy of the job's namespace, which every build carries. */
function isolationPolicy(b: JobBuild): NetworkPolicy {
  const policy = companions(b, 'NetworkPolicy').find((p) => p.metadata.name === 'job-isolation');
  assert.ok(policy);
  return policy;
}
/** A word of an example app's invocation, as it appears in a container command (Kubernetes-escaped). */
function invocationWord(name: string, index: number): string {
  const item = catalog.find(name, '1.0')?.application.invocation.invocation[index];
  assert.equal(item?.type, 'word');
  return item.word.replaceAll('$', '$$$$');
}

describe('plugin order', () => {
  test("is exactly UCloud's order (SPEC §2), with IM2's Ssh after Proxy", () => {
    assert.deepEqual(
      PLUGINS.map((p) => p.name),
      [
        'Task',
        'Parameter',
        'FileMount',
        'MultiNode',
        'SharedMemory',
        'Expiry',
        'Accounting',
        'Miscellaneous',
        'NetworkLimit',
        'FairShare',
        'Minikube',
        'KataContainer',
        'ConnectToJob',
        'Proxy',
        'Ssh',
        'FileOutput',
      ],
    );
  });

  test('buildJob calls onCreate in list order, awaiting async plugins, over one builder', async () => {
    const events: string[] = [];
    const builds = new Set<JobBuild>();
    const sync = (name: string): JobPlugin => ({
      name,
      onCreate(_ctx, _job, b) {
        builds.add(b);
        events.push(name);
      },
    });
    const async = (name: string, ticks: number): JobPlugin => ({
      name,
      async onCreate(_ctx, _job, b) {
        builds.add(b);
        events.push(`${name}:start`);
        // Several turns of the event loop: a caller that did not await would run the next plugin first.
        for (let i = 0; i < ticks; i++) await new Promise((resolve) => setImmediate(resolve));
        events.push(`${name}:end`);
      },
    });
    const result = await build(wordCount(), {
      plugins: [sync('A'), async('B', 5), { name: 'no hook' }, sync('C'), async('D', 1), sync('E')],
    });
    assert.deepEqual(events, ['A', 'B:start', 'B:end', 'C', 'D:start', 'D:end', 'E']);
    assert.deepEqual([...builds], [result]);
  });

  test('a failing plugin stops the pipeline and fails buildJob', async () => {
    const events: string[] = [];
    const plugins: JobPlugin[] = [
      { name: 'A', onCreate: () => void events.push('A') },
      {
        name: 'B',
        async onCreate() {
          await Promise.resolve();
          throw new Error('B failed');
        },
      },
      { name: 'C', onCreate: () => void events.push('C') },
    ];
    await assert.rejects(build(wordCount(), { plugins }), /B failed/);
    assert.deepEqual(events, ['A']);
  });

  test('the builder starts as the named, labelled Volcano Job', async () => {
    const job = prepare(wordCount());
    const b = await buildJob(job, { config, peers: new Map() }, []);
    assert.deepEqual(b.volcanoJob, {
      apiVersion: 'batch.volcano.sh/v1alpha1',
      kind: 'Job',
      metadata: {
        name: JOB_NAME,
        namespace: 'ucompute-jobs',
        labels: {
          'ucompute.dev/job-id': JOB_ID,
          'ucompute.dev/owner': 'u-alice',
          'app.kubernetes.io/managed-by': 'ucompute',
        },
        annotations: { 'ucompute.dev/created-by': 'alice' },
      },
      spec: { tasks: [] },
    });
    assert.deepEqual(b.companions, []);
  });
});

describe('Task', () => {
  test('builds the gang-scheduled core of the Volcano Job', async () => {
    const b = await build(wordCount(), { config: { kubernetes: { namespaceStrategy: 'single' } } });
    const spec = b.volcanoJob.spec;
    assert.equal(spec.schedulerName, 'volcano');
    assert.equal(spec.minAvailable, 1);
    assert.equal(spec.queue, 'default');
    assert.equal('maxRetry' in spec, false, 'no policy restarts the job: Volcano keeps its default');
    assert.deepEqual(spec.plugins, { env: [], svc: [] });
    assert.deepEqual(spec.policies, [
      { event: 'PodFailed', action: 'TerminateJob' },
      { event: 'PodEvicted', action: 'AbortJob' },
    ]);
    const t = task(b);
    assert.equal(t.name, 'job');
    assert.equal(t.replicas, 1);
    assert.equal(t.minAvailable, 1);
    assert.deepEqual(t.template.metadata?.labels, {
      'ucompute.dev/job-id': JOB_ID,
      'ucompute.dev/owner': 'u-alice',
      'app.kubernetes.io/managed-by': 'ucompute',
    });
    const c = container(b);
    assert.equal(c.name, 'user-job');
    assert.equal(c.image, 'debian:bookworm-slim');
    assert.equal(c.imagePullPolicy, 'IfNotPresent');
  });

  test('the queue is the configured one (FairShare later replaces it per owner)', async () => {
    const single = await build(wordCount(), {
      config: { kubernetes: { namespaceStrategy: 'single', queue: 'research' } },
    });
    assert.equal(single.volcanoJob.spec.queue, 'research');
    const taskOnly = await build(wordCount(), {
      plugins: [taskPlugin],
      config: { kubernetes: { queue: 'q1' } },
    });
    assert.equal(taskOnly.volcanoJob.spec.queue, 'q1');
  });

  test('minAvailable and replicas follow the replica count', async () => {
    const b = await build(app('mpi-hello', { replicas: 3 }));
    assert.equal(b.volcanoJob.spec.minAvailable, 3);
    assert.equal(task(b).replicas, 3);
    assert.equal(task(b).minAvailable, 3);
  });

  test('requests equal limits from the product: cpu millis, memory Gi', async () => {
    const b = await build(wordCount({ product: STANDARD_8 }));
    const expected = { cpu: '8000m', memory: '32Gi' };
    assert.deepEqual(container(b).resources, { requests: expected, limits: expected });
  });

  test("a product's process limit is recorded on the job for the local backend; none by default", async () => {
    const job = prepare(wordCount());
    const limited = await buildJob(
      { ...job, product: { ...job.product, pids: 512 } },
      { config, peers: new Map() },
    );
    assert.equal(annotations(limited)[PIDS_LIMIT_ANNOTATION], '512');
    assert.equal(annotations(await build(wordCount()))[PIDS_LIMIT_ANNOTATION], undefined);
  });

  test('a GPU product adds nvidia.com/gpu and its node selector', async () => {
    const b = await build(wordCount({ product: GPU_1 }));
    const expected = { cpu: '8000m', memory: '48Gi', 'nvidia.com/gpu': '1' };
    assert.deepEqual(container(b).resources, { requests: expected, limits: expected });
    assert.deepEqual(pod(b).nodeSelector, { 'ucompute.dev/machine': 'u1-gpu' });
  });

  test('no node selector, tolerations or pull secrets unless configured', async () => {
    const p = pod(await build(wordCount()));
    assert.equal(p.nodeSelector, undefined);
    assert.equal(p.tolerations, undefined);
    assert.equal(p.imagePullSecrets, undefined);
  });

  test('tolerations come from the configuration, per product category', async () => {
    const config: PipelineConfig = {
      kubernetes: {
        tolerations: {
          'u1-gpu': [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
          'u1-standard': [{ key: 'pool', operator: 'Equal', value: 'shared', effect: 'NoSchedule' }],
        },
      },
    };
    assert.deepEqual(pod(await build(wordCount({ product: GPU_1 }), { config })).tolerations, [
      { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
    ]);
    assert.deepEqual(pod(await build(wordCount(), { config })).tolerations, [
      { key: 'pool', operator: 'Equal', value: 'shared', effect: 'NoSchedule' },
    ]);
    assert.equal(pod(await build(wordCount({ product: SECURE_2 }), { config })).tolerations, undefined);
  });

  test('image pull secrets from the configuration', async () => {
    const b = await build(wordCount(), {
      config: { kubernetes: { imagePullSecrets: ['regcred', 'mirror'] } },
    });
    assert.deepEqual(pod(b).imagePullSecrets, [{ name: 'regcred' }, { name: 'mirror' }]);
  });

  test('ssh plugin only for multi-replica allowMultiNode apps; root apps use the default key path', async () => {
    const mpi = await build(app('mpi-hello', { replicas: 3 }));
    assert.deepEqual(mpi.volcanoJob.spec.plugins, { env: [], svc: [], ssh: [] });
    assert.equal(container(mpi).env, undefined);

    const mpiSingle = await build(app('mpi-hello'));
    assert.deepEqual(mpiSingle.volcanoJob.spec.plugins, { env: [], svc: [] });
  });

  test('non-root multi-replica apps get the ssh keys in their own home', async () => {
    const terminal = await build(app('terminal', { replicas: 3 }));
    assert.deepEqual(terminal.volcanoJob.spec.plugins, {
      env: [],
      svc: [],
      ssh: ['--ssh-key-file-path=/home/ucompute/.ssh'],
    });
    assert.deepEqual(container(terminal).env, [{ name: 'HOME', value: '/home/ucompute' }]);

    const single = await build(app('terminal'));
    assert.deepEqual(single.volcanoJob.spec.plugins, { env: [], svc: [] });
    assert.equal(container(single).env, undefined);
  });
});

describe('Parameter', () => {
  test('the command is the rendered invocation (argv, files at /work/<name>)', async () => {
    const b = await build(
      wordCount({ parameters: { ...wordCount().parameters, top: { type: 'integer', value: 25 } } }),
    );
    assert.deepEqual(container(b).command, [
      'sh',
      '-c',
      invocationWord('word-count', 2),
      'word-count',
      '/work/moby.txt',
      'yes',
      '25',
    ]);
    assert.equal(container(b).args, undefined);
  });

  test('booleans render their falseValue, defaults fill the rest', async () => {
    const b = await build(
      wordCount({ parameters: { ...wordCount().parameters, ignoreCase: { type: 'boolean', value: false } } }),
    );
    assert.deepEqual(container(b).command?.slice(3), ['word-count', '/work/moby.txt', 'no', '10']);
  });

  test('a separate variable prefix, and nothing when the optional value is absent', async () => {
    const served = await build(
      app('file-server', { parameters: { folder: { type: 'file', path: '/home/alice/site' } } }),
    );
    assert.deepEqual(container(served).command, [
      'python3',
      '-m',
      'http.server',
      '8080',
      '--bind',
      '0.0.0.0',
      '--directory',
      '/work/site',
    ]);
    const bare = await build(app('file-server'));
    assert.deepEqual(container(bare).command, ['python3', '-m', 'http.server', '8080', '--bind', '0.0.0.0']);
  });

  test('peers render as their host name, enumerations as their value', async () => {
    const check = await build(httpCheck());
    assert.deepEqual(container(check).command?.slice(3), ['server', '8080', '']);
    const desktop = await build(
      app('desktop', { parameters: { geometry: { type: 'text', value: 'Large' } } }),
    );
    assert.deepEqual(container(desktop).command?.slice(3), ['desktop', '1920x1080']);
  });

  test("env comes from the app's environment map", async () => {
    assert.deepEqual(container(await build(app('file-server'))).env, [
      { name: 'PYTHONUNBUFFERED', value: '1' },
    ]);
    assert.equal(container(await build(wordCount())).env, undefined);
  });

  test('UCLOUD_OPEN_WITH_FILE names the opened file under its mounted parent', async () => {
    const b = await build(app('desktop', { openedFile: '/home/alice/notes/todo.txt' }));
    assert.deepEqual(container(b).env, [{ name: 'UCLOUD_OPEN_WITH_FILE', value: '/work/notes/todo.txt' }]);
    assert.ok(
      container(b).volumeMounts?.some(
        (m) => m.mountPath === '/work/notes' && m.subPath === 'home/alice/notes' && m.readOnly === false,
      ),
    );
    assert.equal(
      container(await build(app('desktop'))).env?.find((e) => e.name === 'UCLOUD_OPEN_WITH_FILE'),
      undefined,
    );
  });
});

describe('FileMount', () => {
  const STORAGE_VOLUME = { name: 'storage', persistentVolumeClaim: { claimName: 'ucompute-storage' } };

  test('the job folder at /work and inputs at /work/<name>, by sub-path of one claim', async () => {
    const b = await build(wordCount());
    assert.deepEqual(pod(b).volumes?.[0], STORAGE_VOLUME);
    const storageMounts = container(b).volumeMounts?.filter((m) => m.name === 'storage');
    assert.deepEqual(storageMounts, [
      { name: 'storage', mountPath: '/work', subPath: `home/alice/Jobs/Word count/${JOB_ID}` },
      { name: 'storage', mountPath: '/work/moby.txt', subPath: 'home/alice/books/moby.txt', readOnly: true },
    ]);
    assert.equal(b.outputFolder, `/home/alice/Jobs/Word count/${JOB_ID}`);
  });

  test('a project job works in the project drive', async () => {
    const b = await build(
      wordCount({ parameters: { input: { type: 'file', path: '/projects/climate/data/in.txt' } } }),
      { project: 'climate' },
    );
    assert.deepEqual(
      container(b).volumeMounts?.filter((m) => m.name === 'storage'),
      [
        { name: 'storage', mountPath: '/work', subPath: `projects/climate/Jobs/Word count/${JOB_ID}` },
        {
          name: 'storage',
          mountPath: '/work/in.txt',
          subPath: 'projects/climate/data/in.txt',
          readOnly: false,
        },
      ],
    );
    assert.equal(b.outputFolder, `/projects/climate/Jobs/Word count/${JOB_ID}`);
  });

  test("the owner's drive, then additional folders, are mounted by sub-path with their readOnly flag", async () => {
    const b = await build(
      app('terminal', {
        resources: [
          { type: 'file', path: '/home/alice/data', readOnly: true },
          { type: 'file', path: '/home/alice/scratch' },
        ],
      }),
    );
    assert.deepEqual(container(b).volumeMounts?.slice(0, 4), [
      { name: 'storage', mountPath: '/work', subPath: `home/alice/Jobs/Terminal/${JOB_ID}` },
      { name: 'storage', mountPath: '/work/alice', subPath: 'home/alice', readOnly: false },
      { name: 'storage', mountPath: '/work/data', subPath: 'home/alice/data', readOnly: true },
      { name: 'storage', mountPath: '/work/scratch', subPath: 'home/alice/scratch', readOnly: false },
    ]);
  });

  test('the configured claim and storageSubPath prefix every sub-path', async () => {
    const b = await build(wordCount(), {
      config: { kubernetes: { storageClaim: 'cephfs', storageSubPath: 'ucompute/data' } },
    });
    assert.deepEqual(pod(b).volumes?.[0], {
      name: 'storage',
      persistentVolumeClaim: { claimName: 'cephfs' },
    });
    assert.deepEqual(
      container(b)
        .volumeMounts?.filter((m) => m.name === 'storage')
        .map((m) => m.subPath),
      [`ucompute/data/home/alice/Jobs/Word count/${JOB_ID}`, 'ucompute/data/home/alice/books/moby.txt'],
    );
    assert.equal(b.outputFolder, `/home/alice/Jobs/Word count/${JOB_ID}`);
  });

  test('creates the job folder and writes JobParameters.json, awaited before the next plugin', async () => {
    const calls: string[] = [];
    const files = new Map<string, string>();
    const storage: JobStorage = {
      async ensureFolder(path) {
        await new Promise((resolve) => setImmediate(resolve));
        calls.push(`ensureFolder ${path}`);
      },
      async writeFile(path, content) {
        await new Promise((resolve) => setImmediate(resolve));
        calls.push(`writeFile ${path}`);
        files.set(path, content);
      },
    };
    const next: JobPlugin = { name: 'Next', onCreate: () => void calls.push('next plugin') };
    const spec = wordCount({ name: 'Counting', timeAllocation: { hours: 0, minutes: 30, seconds: 0 } });
    const b = await build(spec, { storage, plugins: [taskPlugin, fileMountPlugin, next] });
    const folder = `/home/alice/Jobs/Word count/${JOB_ID}`;
    assert.deepEqual(calls, [
      `ensureFolder ${folder}`,
      `writeFile ${folder}/JobParameters.json`,
      'next plugin',
    ]);
    assert.equal(b.outputFolder, folder);

    const text = files.get(`${folder}/JobParameters.json`) ?? '';
    assert.ok(text.endsWith('\n'));
    const job = prepare(spec);
    assert.deepEqual(JSON.parse(text), {
      jobId: JOB_ID,
      createdAt: job.createdAt,
      owner: { createdBy: 'alice' },
      application: { name: 'word-count', version: '1.0' },
      request: spec,
      resolvedParameters: {
        input: { type: 'file', path: '/home/alice/books/moby.txt', readOnly: true },
        ignoreCase: { type: 'boolean', value: true },
        top: { type: 'integer', value: 10 },
      },
      machineType: job.product,
      replicas: 1,
    });
  });

  test('planning (no storage) touches nothing but still reports the folder', async () => {
    const b = await build(wordCount(), { plugins: [taskPlugin, fileMountPlugin] });
    assert.equal(b.outputFolder, `/home/alice/Jobs/Word count/${JOB_ID}`);
  });
});

describe('MultiNode', () => {
  test('an emptyDir at /etc/ucloud written by an init container', async () => {
    const b = await build(app('mpi-hello', { replicas: 3, product: STANDARD_2 }));
    assert.deepEqual(
      pod(b).volumes?.find((v) => v.name === 'ucloud-multinode'),
      { name: 'ucloud-multinode', emptyDir: {} },
    );
    assert.deepEqual(
      container(b).volumeMounts?.find((m) => m.name === 'ucloud-multinode'),
      { name: 'ucloud-multinode', mountPath: '/etc/ucloud' },
    );
    assert.deepEqual(pod(b).initContainers, [
      {
        name: 'ucloud-compat',
        image: 'busybox:1.36',
        imagePullPolicy: 'IfNotPresent',
        command: [
          'sh',
          '-c',
          [
            'set -eu',
            'cd /etc/ucloud',
            'printf "%s\\n" "$VC_TASK_INDEX" > rank.txt',
            'printf "%s\\n" "3" > number_of_nodes.txt',
            `printf "%s\\n" "${JOB_ID}" > job_id.txt`,
            'printf "%s\\n" "2" > cores.txt',
            `awk '{ print; print > ("node-" (NR - 1) ".txt") }' /etc/volcano/job.host > nodes.txt`,
          ].join('\n'),
        ],
        resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
        volumeMounts: [{ name: 'ucloud-multinode', mountPath: '/etc/ucloud' }],
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 11042,
          runAsGroup: 11042,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        },
      },
    ]);
  });

  test('the helper image and uid come from the configuration; single replicas get it too', async () => {
    const b = await build(wordCount(), {
      config: { jobUid: 5000, kubernetes: { helperImage: 'alpine:3.20' } },
    });
    const init = pod(b).initContainers?.[0];
    assert.equal(init?.image, 'alpine:3.20');
    assert.deepEqual(init?.securityContext, {
      runAsNonRoot: true,
      runAsUser: 5000,
      runAsGroup: 5000,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    assert.match(init?.command?.[2] ?? '', /"1" > number_of_nodes\.txt/);
  });

  describe('the init script, run with sh against the svc plugin host file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ucompute-multinode-'));
    after(() => rmSync(dir, { recursive: true, force: true }));

    test('writes rank, node count, job id, cores and one file per node', async () => {
      const b = await build(app('mpi-hello', { replicas: 3, product: STANDARD_8 }));
      const hostFile = svcData(b.volcanoJob)['job.host'];
      assert.equal(hostFile, [0, 1, 2].map((i) => `${JOB_NAME}-job-${i}.${JOB_NAME}`).join('\n'));
      const out = join(dir, 'ucloud');
      mkdirSync(out);
      writeFileSync(join(dir, 'job.host'), hostFile ?? '');
      const script = (pod(b).initContainers?.[0]?.command?.[2] ?? '')
        .replace('cd /etc/ucloud', `cd '${out}'`)
        .replace('/etc/volcano/job.host', `'${join(dir, 'job.host')}'`);
      const result = spawnSync('sh', ['-c', script], {
        env: { PATH: process.env.PATH, VC_TASK_INDEX: '1' },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      assert.equal(result.status, 0, result.stderr);
      const read = (name: string) => readFileSync(join(out, name), 'utf8');
      const hosts = (hostFile ?? '').split('\n');
      assert.equal(read('rank.txt'), '1\n');
      assert.equal(read('number_of_nodes.txt'), '3\n');
      assert.equal(read('job_id.txt'), `${JOB_ID}\n`);
      assert.equal(read('cores.txt'), '8\n');
      assert.equal(read('nodes.txt'), `${hosts.join('\n')}\n`);
      for (const [i, host] of hosts.entries()) assert.equal(read(`node-${i}.txt`), `${host}\n`);
    });
  });
});

describe('SharedMemory', () => {
  test('/dev/shm is a memory volume as large as the product memory', async () => {
    for (const [product, size] of [
      [STANDARD_1, '2Gi'],
      [GPU_1, '48Gi'],
    ] as const) {
      const b = await build(wordCount({ product }));
      assert.deepEqual(
        pod(b).volumes?.find((v) => v.name === 'shm'),
        { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: size } },
      );
      assert.deepEqual(
        container(b).volumeMounts?.find((m) => m.name === 'shm'),
        { name: 'shm', mountPath: '/dev/shm' },
      );
    }
  });
});

describe('Expiry', () => {
  const MAX_TIME = 'ucompute.dev/max-time-ms';

  test('the time allocation in milliseconds', async () => {
    const b = await build(wordCount({ timeAllocation: { hours: 1, minutes: 30, seconds: 15 } }));
    assert.equal(annotations(b)[MAX_TIME], String((90 * 60 + 15) * 1000));
  });

  test('no annotation without a time limit', async () => {
    const b = await build(wordCount({ timeAllocation: null }));
    assert.equal(MAX_TIME in annotations(b), false);
  });

  test("the tool's default when the allocation is omitted", async () => {
    assert.equal(annotations(await build(wordCount()))[MAX_TIME], '3600000'); // debian: 1 h
    assert.equal(annotations(await build(app('file-server')))[MAX_TIME], '28800000'); // python: 8 h
  });
});

describe('Accounting', () => {
  test('units = replicas × vCPU, with the price and its unit', async () => {
    const b = await build(app('mpi-hello', { replicas: 3, product: STANDARD_8 }));
    const a = annotations(b);
    assert.equal(a['ucompute.dev/product'], 'u1-standard-8/u1-standard');
    assert.equal(a['ucompute.dev/charge-units'], '24');
    assert.equal(a['ucompute.dev/price-per-unit'], '1');
    assert.equal(a['ucompute.dev/unit-of-price'], 'CREDITS_PER_MINUTE');
  });

  test('units = replicas × GPU for a product priced per GPU', async () => {
    const a = annotations(await build(app('terminal', { replicas: 3, product: GPU_1 })));
    assert.equal(a['ucompute.dev/product'], 'u1-gpu-1/u1-gpu');
    assert.equal(a['ucompute.dev/charge-units'], '3');
    assert.equal(a['ucompute.dev/price-per-unit'], '60');
    assert.equal(a['ucompute.dev/unit-of-price'], 'CREDITS_PER_HOUR');
  });

  test('a single replica of a 2-vCPU product', async () => {
    const a = annotations(await build(wordCount({ product: SECURE_2 })));
    assert.equal(a['ucompute.dev/charge-units'], '2');
    assert.equal(a['ucompute.dev/price-per-unit'], '2');
  });
});

describe('Miscellaneous', () => {
  test('hardening defaults for a non-root app', async () => {
    const b = await build(wordCount());
    assert.equal(pod(b).restartPolicy, 'Never');
    assert.equal(pod(b).automountServiceAccountToken, false);
    assert.equal(pod(b).enableServiceLinks, false);
    assert.deepEqual(pod(b).securityContext, { seccompProfile: { type: 'RuntimeDefault' } });
    assert.equal(container(b).workingDir, '/work');
    assert.deepEqual(container(b).securityContext, {
      runAsNonRoot: true,
      runAsUser: 11042,
      runAsGroup: 11042,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
  });

  test('the configured job uid', async () => {
    const b = await build(wordCount(), { config: { jobUid: 4242 } });
    assert.equal(container(b).securityContext?.runAsUser, 4242);
    assert.equal(container(b).securityContext?.runAsGroup, 4242);
  });

  test('mpi-hello runs as root (runAsRoot), still without privilege escalation', async () => {
    const b = await build(app('mpi-hello'));
    assert.deepEqual(container(b).securityContext, { runAsUser: 0, allowPrivilegeEscalation: false });
  });

  test('root apps: refused where root is root on the node, allowed with user namespaces (hostUsers: false)', async () => {
    // A configuration file with nothing to say on root apps, for a Kubernetes cluster.
    assert.throws(
      () => prepare(app('mpi-hello'), { config: { security: {} } }),
      /runs as root \(runAsRoot\).*kubernetes\.userNamespaces.*security\.allowRootApps/,
    );
    const b = await build(app('mpi-hello'), {
      config: { security: {}, kubernetes: { userNamespaces: true } },
    });
    assert.equal(b.volcanoJob.spec.tasks[0]!.template.spec.hostUsers, false);
    assert.deepEqual(container(b).securityContext, { runAsUser: 0, allowPrivilegeEscalation: false });
    for (const object of [b.volcanoJob, ...b.companions]) assertValidKubernetesObject(object);
    // Allowed by the operator without user namespaces: root on the node, as asked.
    const opted = await build(app('mpi-hello'), { config: { security: { allowRootApps: true } } });
    assert.equal(opted.volcanoJob.spec.tasks[0]!.template.spec.hostUsers, undefined);
    // Apps that do not run as root never get a user namespace they do not need.
    const plain = await build(wordCount(), { config: { kubernetes: { userNamespaces: true } } });
    assert.equal(plain.volcanoJob.spec.tasks[0]!.template.spec.hostUsers, undefined);
  });

  test('root apps run by default where the backend maps root to an unprivileged id (the local sandbox)', () => {
    const local = resolvePipelineConfig({ security: {} }, { rootIsUnprivileged: true });
    assert.equal(local.security.allowRootApps, true);
    assert.equal(resolvePipelineConfig({ security: {} }).security.allowRootApps, false);
    const refused = resolvePipelineConfig(
      { security: { allowRootApps: false } },
      { rootIsUnprivileged: true },
    );
    assert.equal(refused.security.allowRootApps, false, "the operator's word wins");
  });

  test('no working directory when the app keeps its own', async () => {
    const { catalog: custom, issues } = buildCatalog([
      {
        path: 'custom.yml',
        text: [
          'tool: v1',
          'name: t',
          'version: "1"',
          'title: T',
          'authors: [me]',
          'description: d',
          'container: busybox',
          'backend: DOCKER',
          '---',
          'application: v1',
          'name: stay',
          'version: "1.0"',
          'title: Stay',
          'authors: [me]',
          'description: d',
          'tool: { name: t, version: "1" }',
          'invocation: [pwd]',
          'container: { changeWorkingDirectory: false }',
        ].join('\n'),
      },
    ]);
    assert.deepEqual(issues, []);
    const b = await build(app('stay'), { catalog: custom });
    assert.equal(container(b).workingDir, undefined);
    assert.equal(container(b).image, 'busybox');
  });
});

describe('NetworkLimit', () => {
  test('bandwidth annotations on the pods of the u1-secure-2 product', async () => {
    const b = await build(wordCount({ product: SECURE_2 }));
    assert.deepEqual(task(b).template.metadata?.annotations, {
      'kubernetes.io/ingress-bandwidth': '100M',
      'kubernetes.io/egress-bandwidth': '100M',
    });
  });

  test('none for products without limits', async () => {
    assert.equal(task(await build(wordCount())).template.metadata?.annotations, undefined);
  });
});

describe('FairShare', () => {
  const LABELS = { 'app.kubernetes.io/managed-by': 'ucompute' };

  test('a namespace and a queue per user, weighted by default', async () => {
    const b = await build(wordCount());
    assert.equal(b.volcanoJob.metadata.namespace, 'ucompute-u-alice');
    assert.equal(b.volcanoJob.spec.queue, 'ucompute-u-alice');
    assert.equal(annotations(b)['ucompute.dev/fair-share-weight'], '1');
    assert.deepEqual(b.companions.slice(0, 2), [
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        // The fixtures' operator allows the example catalogue's root app: its pods meet "baseline".
        metadata: {
          name: 'ucompute-u-alice',
          labels: { ...LABELS, 'pod-security.kubernetes.io/enforce': 'baseline' },
        },
      },
      {
        apiVersion: 'scheduling.volcano.sh/v1beta1',
        kind: 'Queue',
        metadata: { name: 'ucompute-u-alice', labels: LABELS },
        spec: { weight: 1, reclaimable: true },
      },
    ]);
  });

  test('weights from the configuration, for users and projects', async () => {
    const config: PipelineConfig = {
      prefix: 'lab',
      fairShare: { weights: { 'user:alice': 2, 'project:climate': 4 }, defaultWeight: 3 },
    };
    const user = await build(wordCount(), { config });
    assert.equal(user.volcanoJob.metadata.namespace, 'lab-u-alice');
    assert.equal(annotations(user)['ucompute.dev/fair-share-weight'], '2');
    assert.equal(companions(user, 'Queue')[0]?.spec.weight, 2);

    const project = await build(app('terminal'), { config, project: 'climate' });
    assert.equal(project.volcanoJob.metadata.namespace, 'lab-p-climate');
    assert.equal(project.volcanoJob.spec.queue, 'lab-p-climate');
    assert.deepEqual(
      companions(project, 'Namespace').map((n) => n.metadata.name),
      ['lab-p-climate'],
    );
    assert.equal(companions(project, 'Queue')[0]?.spec.weight, 4);

    const other = await build(app('terminal'), { config, user: 'bob' });
    assert.equal(other.volcanoJob.metadata.namespace, 'lab-u-bob');
    assert.equal(companions(other, 'Queue')[0]?.spec.weight, 3);
  });

  test('user names that are not DNS labels still give distinct valid namespaces', async () => {
    const a = await build(app('terminal'), { user: 'a.b' });
    const b = await build(app('terminal'), { user: 'a_b' });
    const names = [a, b].map((x) => x.volcanoJob.metadata.namespace ?? '');
    assert.notEqual(names[0], names[1]);
    for (const name of names) assert.match(name, /^ucompute-u-[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
  });

  test('the single strategy uses the configured namespace and queue, and emits no Namespace or Queue', async () => {
    const b = await build(wordCount(), {
      config: { kubernetes: { namespaceStrategy: 'single', namespace: 'batch', queue: 'research' } },
    });
    assert.equal(b.volcanoJob.metadata.namespace, 'batch');
    assert.equal(b.volcanoJob.spec.queue, 'research');
    assert.equal(annotations(b)['ucompute.dev/fair-share-weight'], '1');
    assert.deepEqual(companions(b, 'Namespace'), []);
    assert.deepEqual(companions(b, 'Queue') as VolcanoQueue[], []);
    assert.equal(isolationPolicy(b).metadata.namespace, 'batch');
  });
});

describe('Minikube', () => {
  const MINIKUBE: PipelineConfig = { kubernetes: { minikube: true } };
  const service = (targetPort: number): Service => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: `${JOB_NAME}-mk`,
      namespace: 'ucompute-u-alice',
      labels: { 'ucompute.dev/job-id': JOB_ID, 'app.kubernetes.io/managed-by': 'ucompute' },
    },
    spec: {
      type: 'LoadBalancer',
      selector: { 'volcano.sh/job-name': JOB_NAME },
      ports: [{ name: 'session', port: 80, targetPort, protocol: 'TCP' }],
    },
  });

  test('off by default', async () => {
    assert.deepEqual(companions(await build(app('file-server')), 'Service'), []);
  });

  test('a LoadBalancer Service for web and VNC apps when configured', async () => {
    assert.deepEqual(companions(await build(app('file-server'), { config: MINIKUBE }), 'Service'), [
      service(8080),
    ]);
    assert.deepEqual(companions(await build(app('desktop'), { config: MINIKUBE }), 'Service'), [
      service(5900),
    ]);
  });

  test('nothing for batch apps', async () => {
    assert.deepEqual(companions(await build(wordCount(), { config: MINIKUBE }), 'Service'), []);
    assert.deepEqual(companions(await build(app('terminal'), { config: MINIKUBE }), 'Service'), []);
  });
});

describe('KataContainer', () => {
  test('runtimeClassName for the u1-secure-2 product only', async () => {
    assert.equal(pod(await build(wordCount({ product: SECURE_2 }))).runtimeClassName, 'kata');
    for (const product of [STANDARD_1, STANDARD_2, STANDARD_8, GPU_1]) {
      assert.equal(pod(await build(wordCount({ product }))).runtimeClassName, undefined);
    }
  });
});

describe('ConnectToJob', () => {
  const PROXY = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ucompute' } },
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ucompute' } },
  };
  const DNS = {
    ports: [
      { protocol: 'UDP', port: 53 },
      { protocol: 'TCP', port: 53 },
    ],
  };
  const INTERNET = {
    to: [
      {
        ipBlock: {
          cidr: '0.0.0.0/0',
          except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'],
        },
      },
    ],
  };
  const peerPods = (jobId: string) => ({
    podSelector: { matchLabels: { 'volcano.sh/job-name': `j-${jobId}` } },
  });

  test("every job's namespace has the isolation policy: all of ucompute's job pods, the session proxy in, DNS and the internet out", async () => {
    const b = await build(wordCount());
    assert.deepEqual(isolationPolicy(b), {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: 'job-isolation',
        namespace: 'ucompute-u-alice',
        labels: { 'app.kubernetes.io/managed-by': 'ucompute' },
      },
      spec: {
        podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': 'ucompute' } },
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{ from: [PROXY] }],
        egress: [DNS, INTERNET],
      },
    });
    // It selects the job's pods by their template's label.
    assert.equal(task(b).template.metadata?.labels?.['app.kubernetes.io/managed-by'], 'ucompute');
    // One replica and no peers: nothing to open, so no policy of its own (a pod always reaches itself).
    assert.equal(jobPolicy(b), undefined);
    assert.equal('ucompute.dev/peers' in annotations(b), false);
    assert.equal(pod(b).hostAliases, undefined);
  });

  test('a job with replicas has its own policy policy-<id>: its pods to each other, both ways', async () => {
    const b = await build(app('mpi-hello', { replicas: 3 }));
    assert.deepEqual(jobPolicy(b), {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: `policy-${JOB_ID}`,
        namespace: 'ucompute-u-alice',
        labels: { 'ucompute.dev/job-id': JOB_ID, 'app.kubernetes.io/managed-by': 'ucompute' },
      },
      spec: {
        podSelector: OWN_PODS.podSelector,
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{ from: [OWN_PODS] }],
        egress: [{ to: [OWN_PODS] }],
      },
    });
    assertValidKubernetesObject(jobPolicy(b)!);
  });

  test('no internet rule when the configuration forbids it; the proxy namespace is configurable', async () => {
    const b = await build(wordCount(), {
      config: { kubernetes: { allowInternet: false, serviceNamespace: 'platform' } },
    });
    const spec = isolationPolicy(b).spec;
    assert.deepEqual(spec.egress, [DNS]);
    assert.deepEqual(spec.ingress?.[0]?.from?.[0]?.namespaceSelector, {
      matchLabels: { 'kubernetes.io/metadata.name': 'platform' },
    });
  });

  test('a peer adds rules both ways and the peers annotation', async () => {
    const b = await build(httpCheck());
    const spec = jobPolicy(b)?.spec;
    assert.deepEqual(spec?.ingress, [{ from: [peerPods('peer1')] }]);
    assert.deepEqual(spec?.egress, [{ to: [peerPods('peer1')] }]);
    assert.equal(
      annotations(b)['ucompute.dev/peers'],
      JSON.stringify([{ hostname: 'server', jobId: 'peer1' }]),
    );
    assert.equal(pod(b).hostAliases, undefined); // address not known yet
  });

  test('peers from resources too, in order', async () => {
    const b = await build(httpCheck({ resources: [{ type: 'peer', hostname: 'cache', jobId: 'peer2' }] }));
    assert.deepEqual(jobPolicy(b)?.spec.egress, [{ to: [peerPods('peer1'), peerPods('peer2')] }]);
    assert.deepEqual(JSON.parse(annotations(b)['ucompute.dev/peers'] ?? ''), [
      { hostname: 'server', jobId: 'peer1' },
      { hostname: 'cache', jobId: 'peer2' },
    ]);
  });

  test('a peer in another namespace is selected with a namespaceSelector; a known address gives a host alias', async () => {
    const peers = new Map<string, PeerLocation>([
      ['peer1', { namespace: 'ucompute-u-bob', address: '10.1.2.3' }],
    ]);
    const b = await build(httpCheck(), { peers });
    const bobPods = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ucompute-u-bob' } },
      ...peerPods('peer1'),
    };
    const spec = jobPolicy(b)?.spec;
    assert.deepEqual(spec?.ingress, [{ from: [bobPods] }]);
    assert.deepEqual(spec?.egress, [{ to: [bobPods] }]);
    assert.deepEqual(pod(b).hostAliases, [{ ip: '10.1.2.3', hostnames: ['server'] }]);
    assertValidKubernetesObject(b.volcanoJob);
    assertValidKubernetesObject(jobPolicy(b)!);
    assertValidKubernetesObject(isolationPolicy(b));
  });

  test('one peer job under two host names is one host alias (hostAliases is keyed by ip)', async () => {
    const peers = new Map<string, PeerLocation>([
      ['peer1', { namespace: 'ucompute-u-alice', address: '10.1.2.3' }],
      ['peer2', { namespace: 'ucompute-u-alice', address: '10.1.2.4' }],
    ]);
    const b = await build(
      httpCheck({
        resources: [
          { type: 'peer', hostname: 'cache', jobId: 'peer1' },
          { type: 'peer', hostname: 'db', jobId: 'peer2' },
        ],
      }),
      { peers },
    );
    assert.deepEqual(pod(b).hostAliases, [
      { ip: '10.1.2.3', hostnames: ['server', 'cache'] },
      { ip: '10.1.2.4', hostnames: ['db'] },
    ]);
    assertValidKubernetesObject(b.volcanoJob);
  });

  test('a peer known in the same namespace needs no namespaceSelector', async () => {
    const peers = new Map<string, PeerLocation>([
      ['peer1', { namespace: 'ucompute-u-alice', address: '10.9.8.7' }],
    ]);
    const b = await build(httpCheck(), { peers });
    assert.deepEqual(jobPolicy(b)?.spec.egress, [{ to: [peerPods('peer1')] }]);
    assert.deepEqual(pod(b).hostAliases, [{ ip: '10.9.8.7', hostnames: ['server'] }]);
  });
});

describe('Proxy', () => {
  test('file-server declares its web port 8080', async () => {
    const b = await build(app('file-server'));
    assert.deepEqual(container(b).ports, [{ name: 'web', containerPort: 8080, protocol: 'TCP' }]);
    assert.equal(annotations(b)['ucompute.dev/web-port'], '8080');
    assert.equal('ucompute.dev/vnc-port' in annotations(b), false);
  });

  test('desktop declares its VNC port 5900', async () => {
    const b = await build(app('desktop'));
    assert.deepEqual(container(b).ports, [{ name: 'vnc', containerPort: 5900, protocol: 'TCP' }]);
    assert.equal(annotations(b)['ucompute.dev/vnc-port'], '5900');
    assert.equal('ucompute.dev/web-port' in annotations(b), false);
  });

  test('batch apps declare nothing', async () => {
    const b = await build(wordCount());
    assert.equal(container(b).ports, undefined);
    assert.equal('ucompute.dev/web-port' in annotations(b), false);
    assert.equal('ucompute.dev/vnc-port' in annotations(b), false);
  });
});

describe('FileOutput', () => {
  test('the output folder is recorded on the job', async () => {
    const b = await build(wordCount());
    assert.equal(annotations(b)['ucompute.dev/output-folder'], `/home/alice/Jobs/Word count/${JOB_ID}`);
  });

  test('nothing without an output folder', async () => {
    const b = await build(wordCount(), { plugins: [taskPlugin, fileOutputPlugin] });
    assert.equal('ucompute.dev/output-folder' in annotations(b), false);
  });
});
