import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ValidationError } from '../src/model/errors.ts';
import { expand } from '../src/volcano/expansion.ts';
import { readManifest } from '../src/volcano/manifest.ts';
import { bytes, cpuMillis } from '../src/volcano/quantity.ts';

const job = (spec: Record<string, unknown>, name = 'demo') => ({
  apiVersion: 'batch.volcano.sh/v1alpha1',
  kind: 'Job',
  metadata: { name },
  spec,
});
const container = { name: 'c', image: 'busybox', command: ['true'] };
const task = (extra: Record<string, unknown> = {}) => ({
  name: 't',
  replicas: 2,
  template: { spec: { containers: [container] } },
  ...extra,
});

function issues(documents: unknown[]): string[] {
  try {
    readManifest(documents, 'job.yaml');
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

test('a manifest with one Volcano Job and its ConfigMaps is read as it is', () => {
  const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg' }, data: { a: 'b' } };
  const m = readManifest([job({ tasks: [task()] }), configMap], 'job.yaml');
  assert.equal(m.job.metadata.name, 'demo');
  assert.deepEqual(m.companions, [configMap]);
});

test('every problem of a manifest is named by its field', () => {
  assert.deepEqual(issues([job({ tasks: [] })]), ['job.yaml.spec.tasks: must list at least one task']);
  assert.deepEqual(issues([job({ tasks: [task({ replicas: -1 })] })]), [
    'job.yaml.spec.tasks[0].replicas: must be a whole number ≥ 0',
  ]);
  assert.deepEqual(issues([job({ tasks: [task(), task()] })]), [
    'job.yaml.spec.tasks[1].name: repeats the task name t',
  ]);
  assert.deepEqual(issues([job({ tasks: [task()], minAvailable: 3 })]), [
    'job.yaml.spec.minAvailable: must not exceed the 2 replicas of the job',
  ]);
  assert.deepEqual(issues([job({ tasks: [task()] }, 'Bad_Name')]), [
    'job.yaml.metadata.name: must be a DNS label (lower-case letters, digits and -)',
  ]);
  assert.deepEqual(
    issues([job({ tasks: [task({ policies: [{ event: 'PodFailed', action: 'Explode' }] })] })]),
    [
      'job.yaml.spec.tasks[0].policies[0].action: must be one of AbortJob, RestartJob, RestartTask, RestartPod, TerminateJob, CompleteJob, ResumeJob',
    ],
  );
  assert.deepEqual(issues([job({ tasks: [task()], plugins: { pytorch: [] } })]), [
    'job.yaml.spec.plugins: the local backend applies the env, svc, ssh, mpi plugins, not pytorch',
  ]);
  assert.deepEqual(issues([{ apiVersion: 'apps/v1', kind: 'Deployment' }]), [
    'job.yaml.kind: the local backend runs a batch.volcano.sh/v1alpha1 Job with ConfigMaps and Secrets, not apps/v1 Deployment',
  ]);
  assert.deepEqual(issues([job({ tasks: [task()] }), job({ tasks: [task()] }, 'other')]), [
    'job.yaml: must hold exactly one Volcano Job (batch.volcano.sh/v1alpha1, kind Job); it holds 2',
  ]);
});

test('Kubernetes variable expansion: $(NAME), $$ and names left as written', () => {
  const vars: Record<string, string> = { A: 'x', B: 'y' };
  const lookup = (n: string) => vars[n];
  assert.equal(expand('$(A)-$(B)', lookup), 'x-y');
  assert.equal(expand('$$(A) costs $$5', lookup), '$(A) costs $5');
  assert.equal(expand('$(MISSING) $(A', lookup), '$(MISSING) $(A');
  assert.equal(expand('$HOME and $', lookup), '$HOME and $');
});

test('quantities: CPU in millicores, memory in bytes', () => {
  assert.equal(cpuMillis('500m'), 500);
  assert.equal(cpuMillis('2'), 2000);
  assert.equal(cpuMillis('0.1'), 100);
  assert.equal(bytes('4Gi'), 4 * 2 ** 30);
  assert.equal(bytes('1G'), 1e9);
  assert.equal(bytes('1e3'), 1000);
  assert.throws(() => bytes('lots'), /"lots" is not a Kubernetes quantity/);
});
