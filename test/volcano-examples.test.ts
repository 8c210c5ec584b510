import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { imageResolver } from '../src/backends/local/images/resolve.ts';
import { localBackend } from '../src/backends/local/local-backend.ts';
import type { BackendEvent } from '../src/jobs/backend.ts';
import { resolveSecurityPolicy } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import { type Manifest, readManifest } from '../src/volcano/emulation/manifest.ts';
import { ROOT } from './support/paths.ts';
import { processRuntime } from './support/process-runtime.ts';
import { until } from './support/until.ts';

/**
 * Volcano's own example Jobs (test/fixtures/volcano-examples, see SOURCE.md there) through the
 * local backend under the default security policy: each is refused naming every field it cannot
 * honour, or runs with Volcano's semantics (tasks, gang, dependsOn, elastic replicas, plugins,
 * policies) on the process test runtime. The examples' images (nginx, TensorFlow, MPI programs)
 * are not on this machine, so each container runs a stand-in program that exits 0 after a moment:
 * what is shown is the controller's behaviour, not the images'.
 */

const DIR = join(ROOT, 'test/fixtures/volcano-examples');
const GPU = (at: string) =>
  `${at}: the local backend cannot honour nvidia.com/gpu (this machine offers cpu and memory); remove it to run here`;
const EPHEMERAL = (at: string) =>
  `${at}: the local backend cannot honour ephemeral-storage (this machine offers cpu and memory); remove it to run here`;
const HOST_PATH = (at: string) =>
  `${at}: a host path is a privileged feature this configuration does not allow (security.allowHostPaths)`;

type Outcome =
  | { refused: string[] }
  /**
   * Runs (every Job of the file) to this phase making this many pods; `order`: tasks in the order
   * their pods were made.
   */
  | { phase: 'Completed'; pods: number; order?: string[] }
  /** Runs on (its containers restart Always, as nginx serves), this many pods made; then cancelled. */
  | { phase: 'Running'; pods: number };

const EXPECTED: Record<string, Outcome> = {
  'MindSpore-example/mindspore_cpu/mindspore-cpu.yaml': { phase: 'Completed', pods: 8 },
  'MindSpore-example/mindspore_gpu/mindspore-gpu.yaml': {
    refused: [GPU('f[0].spec.tasks[1].template.spec.containers[0].resources.limits.nvidia.com/gpu')],
  },
  // Four Jobs of six 0.5-CPU pods on 8 CPUs: all run, those that do not fit wait for room.
  'hierarchical-jobs/jobs.yaml': { phase: 'Completed', pods: 24 },
  'integrations/mpi/mpi-example.yaml': { phase: 'Completed', pods: 3 },
  'integrations/mxnet/train/train-mnist-cpu.yaml': { phase: 'Completed', pods: 5 },
  'integrations/paddlepaddle/ctr-paddlepaddle-on-volcano.yaml': {
    refused: [0, 1].flatMap((t) => {
      const at = `f.spec.tasks[${t}].template.spec`;
      return [
        EPHEMERAL(`${at}.containers[0].resources.requests.ephemeral-storage`),
        EPHEMERAL(`${at}.containers[0].resources.limits.ephemeral-storage`),
        HOST_PATH(`${at}.volumes[0].hostPath`),
      ];
    }),
  },
  'integrations/ray/ray-example.yaml': {
    refused: ['f.spec.plugins: the local backend applies the env, svc, ssh, mpi plugins, not ray'],
  },
  'integrations/tensorflow/benchmark/tf-example.yaml': { phase: 'Completed', pods: 3 },
  'integrations/tensorflow/dist-mnist/tf-dist-mnist-example.yaml': { phase: 'Completed', pods: 3 },
  'invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml': {
    refused: ['f.spec.policies[1].event: repeats the event PodFailed: one event has one action'],
  },
  'invalid_jobs/duplicatedTaskName-webhook-deny.yaml': {
    refused: ['f.spec.tasks[1].name: repeats the task name task-1'],
  },
  'invalid_jobs/minAvailable-webhook-deny.yaml': {
    refused: ['f.spec.minAvailable: must not exceed the 4 replicas of the job'],
  },
  'job-plugin.yaml': { phase: 'Completed', pods: 3 },
  'job.yaml': { phase: 'Completed', pods: 6 },
  'kubecon-2019-china/gang/mpi-example.yaml': { phase: 'Completed', pods: 4 },
  'kubecon-2019-china/horovod-sample/lm-horovod-tf-mnist-v0.5.yaml': { phase: 'Completed', pods: 4 },
  'kubecon-2019-china/mpi-sample/mpi-example.yaml': { phase: 'Completed', pods: 3 },
  // Ten 1-CPU pods that never end (restartPolicy Always) on 8 CPUs: the gang of 3 starts, 5 more
  // fill the machine, 2 wait for room.
  'kubecon-2019-china/task-priority/elastic-job.yaml': { phase: 'Running', pods: 8 },
  'kubecon-2019-china/tf-sample/tf-example.yaml': { phase: 'Completed', pods: 3 },
  // Its nodeSelector (kubernetes.io/os: linux) selects this machine; nginx1, then 2, then 3.
  'task-start-dependency/job.yaml': {
    phase: 'Completed',
    pods: 11,
    order: ['job-nginx1', 'job-nginx2', 'job-nginx3'],
  },
  // The master waits for its 10 workers.
  'task-start-dependency/mpi.yaml': { phase: 'Completed', pods: 11, order: ['mpiworker', 'mpimaster'] },
};

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? yamlFiles(join(dir, e.name))
      : /\.ya?ml$/.test(e.name)
        ? [relative(DIR, join(dir, e.name))]
        : [],
  );
}

function check(file: string): Manifest | string[] {
  const documents = parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => d.toJS());
  try {
    return readManifest(documents, 'f', resolveSecurityPolicy());
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

test('every example Job of the fixtures has its expected outcome written here', () => {
  assert.deepEqual(yamlFiles(DIR).sort(), Object.keys(EXPECTED).sort());
});

for (const [file, expected] of Object.entries(EXPECTED)) {
  if ('refused' in expected) {
    test(`${file} is refused, naming every field the local backend cannot honour`, () => {
      assert.deepEqual(check(file), expected.refused);
    });
    continue;
  }
  test(`${file} runs with Volcano's semantics to ${expected.phase}`, async (t) => {
    const manifest = check(file);
    assert.ok(!Array.isArray(manifest), `refused: ${String(manifest)}`);
    for (const task of manifest.jobs.flatMap((j) => j.spec.tasks)) {
      for (const c of task.template.spec.containers) {
        c.command = ['sh', '-c', 'sleep 0.1'];
        delete c.args;
      }
    }
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-vcex-'));
    const runtime = processRuntime(join(dir, 'pods'), { cpuMillis: 8000, memoryBytes: 16 * 2 ** 30 });
    const backend = await localBackend({
      runtime,
      stateDir: join(dir, 'state'),
      volumes: {
        storageClaim: 'ucompute-storage',
        storageRoot: join(dir, 'storage'),
        images: imageResolver({ folders: {}, store: null, hostUserland: true }),
      },
      gracePeriodMs: 200,
    });
    t.after(async () => {
      await backend.close();
      assert.equal(runtime.live(), 0, 'no process is left behind');
      await rm(dir, { recursive: true, force: true });
    });
    const events: BackendEvent[] = [];
    backend.onEvent((e) => void events.push(e));
    // One Job is `ex`, several are ex0, ex1, …
    const ids = manifest.jobs.map((_, i) => (manifest.jobs.length === 1 ? 'ex' : `ex${i}`));
    for (const [i, id] of ids.entries())
      await backend.submitVolcanoJob(id, manifest.jobs[i]!, manifest.companions);
    const finals = () =>
      ids.map((id) => events.find((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE')));
    const final = () =>
      finals().every((e) => e !== undefined)
        ? (finals().find((e) => e!.state !== 'SUCCESS') ?? finals()[0])
        : undefined;
    if (expected.phase === 'Running') {
      await until(() => backend.phaseOf('ex') === 'Running' && runtime.pods.size >= expected.pods, {
        describe: `the job runs with ${expected.pods} pods`,
      });
      assert.equal(runtime.pods.size, expected.pods);
      assert.equal(final(), undefined);
      await backend.cancel('ex');
      assert.equal(backend.phaseOf('ex'), 'Terminated');
      return;
    }
    const end = await until(final, { describe: 'every job ends', timeout: 15_000 });
    assert.equal(end.state, 'SUCCESS', end.status);
    for (const id of ids) assert.equal(backend.phaseOf(id), expected.phase);
    const pods = [...runtime.pods.keys()];
    assert.equal(pods.length, expected.pods);
    const order = expected.order;
    if (order) {
      // The runtime names pods <job id>-<task>-<index> when the job's own name is not j-<id>.
      const firsts = order.map((task) => pods.findIndex((p) => p.startsWith(`ex-${task}-`)));
      assert.ok(firsts.every((i) => i >= 0));
      assert.deepEqual(
        firsts,
        [...firsts].sort((a, b) => a - b),
        `tasks made in dependency order: ${pods.join(', ')}`,
      );
      const lastOfFirst = pods.findLastIndex((p) => p.startsWith(`ex-${order[0]}-`));
      assert.ok(lastOfFirst < (firsts[1] ?? 0), 'no dependent pod before its dependency is made');
    }
  });
}
