import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveSecurityPolicy, type SecurityPolicy } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import { bytes, cpuMillis } from '../src/volcano/api/quantity.ts';
import { expand } from '../src/volcano/emulation/expansion.ts';
import { readManifest } from '../src/volcano/emulation/manifest.ts';

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

const LOCKED = resolveSecurityPolicy();

function issues(documents: unknown[], security: SecurityPolicy = LOCKED): string[] {
  try {
    readManifest(documents, 'job.yaml', security);
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

test('a manifest with Volcano Jobs and their ConfigMaps is read as it is, every Job in order', () => {
  const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg' }, data: { a: 'b' } };
  const m = readManifest([job({ tasks: [task()] }), configMap], 'job.yaml', LOCKED);
  assert.deepEqual(
    m.jobs.map((j) => j.metadata.name),
    ['demo'],
  );
  assert.deepEqual(m.companions, [configMap]);
  const several = readManifest(
    [job({ tasks: [task()] }), configMap, job({ tasks: [task()] }, 'other')],
    'jobs.yaml',
    LOCKED,
  );
  assert.deepEqual(
    several.jobs.map((j) => j.metadata.name),
    ['demo', 'other'],
  );
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
  assert.deepEqual(issues([job({ tasks: [task()] }), job({ tasks: [task()] })]), [
    'job.yaml[1].metadata.name: repeats the name of the Job at job.yaml[0]: each Job needs its own',
  ]);
  assert.deepEqual(issues([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg' } }]), [
    'job.yaml: must hold a Volcano Job (batch.volcano.sh/v1alpha1, kind Job); it holds none',
  ]);
});

test('generateName is named as such: the local backend needs the name itself', () => {
  const named = { ...job({ tasks: [task()] }), metadata: { generateName: 'demo-' } };
  assert.deepEqual(issues([named]), [
    'job.yaml.metadata.generateName: is not offered by the local backend: give the job a metadata.name (a DNS label)',
  ]);
});

test('numeric quantities are quantities (the CRD takes int-or-string); others are named', () => {
  const numeric = { ...container, resources: { requests: { cpu: 1, memory: 1024 }, limits: { cpu: 0.5 } } };
  assert.deepEqual(issues([job({ tasks: [task({ template: { spec: { containers: [numeric] } } })] })]), []);
  assert.equal(cpuMillis(1), 1000);
  assert.equal(bytes(1024), 1024);
  const bad = { ...container, resources: { limits: { memory: 'lots', cpu: true } } };
  assert.deepEqual(issues([job({ tasks: [task({ template: { spec: { containers: [bad] } } })] })]), [
    'job.yaml.spec.tasks[0].template.spec.containers[0].resources.limits.memory: must be a quantity such as 500m, 2, 4Gi or a number',
    'job.yaml.spec.tasks[0].template.spec.containers[0].resources.limits.cpu: must be a quantity such as 500m, 2, 4Gi or a number',
  ]);
});

test('every field the local backend cannot honour is named at once, never silently run', () => {
  const gpu = {
    ...container,
    ports: [{ containerPort: 80, hostPort: 8080 }],
    resources: { limits: { 'nvidia.com/gpu': 1, 'huawei.com/ascend-910': 2 } },
  };
  const pod = {
    containers: [gpu],
    nodeSelector: { 'kubernetes.io/os': 'windows' },
    priorityClassName: 'high',
    schedulerName: 'default-scheduler',
  };
  const spec = {
    schedulerName: 'kube-batch',
    volumes: [{ mountPath: '/data' }],
    priorityClassName: 'high',
    ttlSecondsAfterFinished: 60,
    tasks: [
      task({
        template: { spec: pod },
        policies: [{ event: 'PodFailed', action: 'RestartJob', timeout: '1m' }],
      }),
    ],
  };
  const notHere = 'the local backend cannot honour';
  assert.deepEqual(issues([job(spec)]), [
    `job.yaml.spec.volumes: ${notHere} job-level volumes (claims Volcano would create); remove it to run here`,
    `job.yaml.spec.priorityClassName: ${notHere} priority classes; remove it to run here`,
    'job.yaml.spec.schedulerName: the local backend schedules as volcano does, not as kube-batch',
    `job.yaml.spec.tasks[0].policies[0].timeout: ${notHere} delayed actions; remove it`,
    'job.yaml.spec.tasks[0].template.spec.nodeSelector.kubernetes.io/os: selects nodes labelled kubernetes.io/os=windows; this machine is kubernetes.io/os=linux',
    `job.yaml.spec.tasks[0].template.spec.priorityClassName: ${notHere} priorityClassName; remove it to run here`,
    'job.yaml.spec.tasks[0].template.spec.schedulerName: the local backend schedules as volcano does, not as default-scheduler',
    `job.yaml.spec.tasks[0].template.spec.containers[0].ports[0].hostPort: ${notHere} host ports; remove it to run here`,
    `job.yaml.spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu: ${notHere} nvidia.com/gpu (this machine offers cpu and memory); remove it to run here`,
    `job.yaml.spec.tasks[0].template.spec.containers[0].resources.limits.huawei.com/ascend-910: ${notHere} huawei.com/ascend-910 (this machine offers cpu and memory); remove it to run here`,
  ]);
  // A selector this machine's own labels satisfy selects it, as on a one-node cluster.
  const linux = {
    containers: [container],
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    schedulerName: 'volcano',
  };
  assert.deepEqual(
    issues([job({ schedulerName: 'volcano', tasks: [task({ template: { spec: linux } })] })]),
    [],
  );
});

test("policies as Volcano's admission webhook checks them: one action per event and exit code, * alone", () => {
  const policies = (list: unknown[]) => issues([job({ tasks: [task()], policies: list })]);
  assert.deepEqual(
    policies([
      { event: 'PodFailed', action: 'RestartJob' },
      { event: 'PodFailed', action: 'AbortJob' },
    ]),
    ['job.yaml.spec.policies[1].event: repeats the event PodFailed: one event has one action'],
  );
  assert.deepEqual(
    policies([
      { exitCode: 3, action: 'RestartJob' },
      { exitCode: 3, action: 'AbortJob' },
      { event: 'PodFailed', exitCode: 4, action: 'AbortJob' },
    ]),
    [
      'job.yaml.spec.policies[1].exitCode: repeats the exit code 3',
      'job.yaml.spec.policies[2].exitCode: must not be given with an event in the same policy',
    ],
  );
  assert.deepEqual(
    policies([
      { event: '*', action: 'AbortJob' },
      { event: 'PodEvicted', action: 'RestartJob' },
    ]),
    ['job.yaml.spec.policies: a policy for every event (*) must be the only one'],
  );
});

test('dependsOn names other tasks of the job, without cycles', () => {
  const a = task({ name: 'a', dependsOn: { name: ['b'] } });
  const b = task({ name: 'b', dependsOn: { name: ['a'], iteration: 'some' } });
  const c = task({ name: 'c', dependsOn: { name: ['nope'] } });
  assert.deepEqual(issues([job({ tasks: [a, b, c] })]), [
    'job.yaml.spec.tasks[1].dependsOn.iteration: must be any or all',
    'job.yaml.spec.tasks[2].dependsOn.name: names no other task of the job (nope)',
    "job.yaml.spec.tasks: the tasks' dependsOn form a cycle (through a)",
  ]);
  assert.deepEqual(
    issues([job({ tasks: [task({ name: 'a' }), task({ name: 'b', dependsOn: { name: ['a'] } })] })]),
    [],
  );
});

test('privileged features are refused, each by its field, unless the operator allows them', () => {
  const privileged = {
    ...container,
    securityContext: {
      privileged: true,
      allowPrivilegeEscalation: true,
      procMount: 'Unmasked',
      capabilities: { add: ['SYS_ADMIN', 'NET_ADMIN'], drop: ['MKNOD'] },
    },
  };
  const pod = {
    hostNetwork: true,
    hostPID: true,
    hostIPC: true,
    volumes: [{ name: 'root', hostPath: { path: '/' } }],
    initContainers: [{ ...container, name: 'i', securityContext: { privileged: true } }],
    containers: [privileged],
  };
  const manifest = job({ tasks: [task({ template: { spec: pod } })] });
  const at = 'job.yaml.spec.tasks[0].template.spec';
  const off = (what: string, setting: string) =>
    `${what} is a privileged feature this configuration does not allow (security.${setting})`;
  assert.deepEqual(issues([manifest]), [
    `${at}.volumes[0].hostPath: ${off('a host path', 'allowHostPaths')}`,
    `${at}.hostNetwork: ${off('hostNetwork', 'allowHostNetwork')}`,
    `${at}.hostPID: ${off('hostPID', 'allowHostNetwork')}`,
    `${at}.hostIPC: ${off('hostIPC', 'allowHostNetwork')}`,
    `${at}.initContainers[0].securityContext.privileged: ${off('a privileged container', 'allowPrivileged')}`,
    `${at}.containers[0].securityContext.privileged: ${off('a privileged container', 'allowPrivileged')}`,
    `${at}.containers[0].securityContext.allowPrivilegeEscalation: ${off('privilege escalation', 'allowPrivileged')}`,
    `${at}.containers[0].securityContext.procMount: ${off('an unmasked /proc', 'allowPrivileged')}`,
    `${at}.containers[0].securityContext.capabilities.add: ${off('adding capabilities (SYS_ADMIN, NET_ADMIN)', 'allowPrivileged')}`,
  ]);
  const open = { allowRootApps: false, allowHostPaths: true, allowHostNetwork: true, allowPrivileged: true };
  assert.deepEqual(issues([manifest], open), []);
  assert.deepEqual(issues([manifest], { ...open, allowHostPaths: false }), [
    `${at}.volumes[0].hostPath: ${off('a host path', 'allowHostPaths')}`,
  ]);
  // Root inside the container is not privileged: the sandbox maps it to an unprivileged range.
  const root = { ...container, securityContext: { runAsUser: 0 } };
  assert.deepEqual(issues([job({ tasks: [task({ template: { spec: { containers: [root] } } })] })]), []);
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
