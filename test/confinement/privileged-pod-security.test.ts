import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planJob } from '../../src/jobs/plan.ts';
import { type PipelineConfig, resolvePipelineConfig } from '../../src/model/config.ts';
import { ValidationError } from '../../src/model/errors.ts';
import type { PodSpec, VolcanoJob } from '../../src/volcano/api/types.ts';
import { CREATED_AT, catalog, JOB_ID, products } from '../support/fixtures.ts';

/**
 * Privileged features are the operator's (SPEC §6): a root app is refused at submit unless the
 * configuration allows it, and every pod template the Kubernetes backend would create passes
 * Pod Security "restricted" unless so allowed. The checker below is written from the Pod
 * Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards), the rules of
 * the baseline and restricted profiles that concern pod specs.
 */

type Json = Record<string, unknown>;
const ALLOWED_VOLUMES = [
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
];
const BASELINE_CAPABILITIES = [
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
];

/** Every violation of the "restricted" profile by a pod spec, as `<field>: <rule>`. */
export function restrictedViolations(pod: PodSpec): string[] {
  const problems: string[] = [];
  const spec = pod as unknown as Json;
  const podSecurity = (spec.securityContext ?? {}) as Json;
  // Baseline.
  for (const key of ['hostNetwork', 'hostPID', 'hostIPC'])
    if (spec[key] === true) problems.push(`${key}: host namespaces`);
  for (const v of (spec.volumes ?? []) as Json[]) {
    const kinds = Object.keys(v).filter((k) => k !== 'name');
    if (!kinds.every((k) => ALLOWED_VOLUMES.includes(k)))
      problems.push(`volumes.${String(v.name)}: volume types (${kinds.join(', ')})`);
  }
  if (spec.securityContext && (podSecurity.sysctls as unknown[] | undefined)?.length)
    problems.push('securityContext.sysctls: sysctls');
  const podSeccomp = (podSecurity.seccompProfile as Json | undefined)?.type;
  if (podSeccomp === 'Unconfined') problems.push('securityContext.seccompProfile: Unconfined');
  const containers = [
    ...((spec.initContainers ?? []) as Json[]).map((c) => ['initContainers', c] as const),
    ...((spec.containers ?? []) as Json[]).map((c) => ['containers', c] as const),
  ];
  for (const [list, c] of containers) {
    const at = `${list}.${String(c.name)}`;
    const sc = (c.securityContext ?? {}) as Json;
    const caps = (sc.capabilities ?? {}) as Json;
    if (sc.privileged === true) problems.push(`${at}.securityContext.privileged: privileged containers`);
    for (const cap of (caps.add ?? []) as string[]) {
      if (!BASELINE_CAPABILITIES.includes(cap)) problems.push(`${at}: capability ${cap} (baseline)`);
      if (cap !== 'NET_BIND_SERVICE') problems.push(`${at}: capability ${cap} (restricted)`);
    }
    for (const p of (c.ports ?? []) as Json[])
      if (p.hostPort !== undefined && p.hostPort !== 0) problems.push(`${at}.ports: host ports`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default') problems.push(`${at}: /proc mount type`);
    // Restricted.
    if (sc.allowPrivilegeEscalation !== false)
      problems.push(`${at}.securityContext.allowPrivilegeEscalation: must be false`);
    const nonRoot = sc.runAsNonRoot ?? podSecurity.runAsNonRoot;
    if (nonRoot !== true) problems.push(`${at}.securityContext.runAsNonRoot: must be true`);
    const uid = sc.runAsUser ?? podSecurity.runAsUser;
    if (uid === 0) problems.push(`${at}.securityContext.runAsUser: must not be 0`);
    const seccomp = ((sc.seccompProfile as Json | undefined)?.type ?? podSeccomp) as string | undefined;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      problems.push(`${at}.securityContext.seccompProfile: RuntimeDefault or Localhost`);
    if (sc.seccompProfile && (sc.seccompProfile as Json).type === 'Unconfined')
      problems.push(`${at}.securityContext.seccompProfile: Unconfined`);
    if (!((caps.drop ?? []) as string[]).includes('ALL'))
      problems.push(`${at}.securityContext.capabilities.drop: must include ALL`);
  }
  return problems;
}

const ALICE = { createdBy: 'alice' };
const APPS = catalog.list().map((r) => r.application);
const ROOT_ALLOWED: PipelineConfig = { security: { allowRootApps: true } };

function parametersOf(name: string): Json {
  if (name === 'word-count')
    return { input: { type: 'file', path: '/home/alice/books/a.txt', readOnly: true } };
  if (name === 'http-check') return { server: { type: 'peer', hostname: 'server', jobId: 'peer1' } };
  return {};
}

async function plan(name: string, replicas: number, config?: PipelineConfig) {
  const app = APPS.find((a) => a.metadata.name === name)!;
  const objects = await planJob(
    {
      application: { name, version: app.metadata.version },
      product: { id: products[0]!.id, category: products[0]!.category },
      parameters: parametersOf(name),
      replicas,
    },
    { id: JOB_ID, owner: ALICE, createdAt: CREATED_AT },
    // Not the test fixtures' environment, which allows the example catalogue's root app.
    { catalog, products, config: resolvePipelineConfig(config) },
  );
  const jobs = objects.filter((o): o is VolcanoJob => o.kind === 'Job');
  assert.equal(jobs.length, 1);
  const namespaces = objects.filter((o) => o.kind === 'Namespace');
  return {
    pods: jobs[0]!.spec.tasks.map((t) => t.template.spec),
    enforced: namespaces.map((n) => n.metadata.labels?.['pod-security.kubernetes.io/enforce']),
  };
}

async function podTemplates(name: string, replicas: number, config?: PipelineConfig): Promise<PodSpec[]> {
  return (await plan(name, replicas, config)).pods;
}

test('the checker finds what the Pod Security Standards forbid', () => {
  const bad = {
    hostNetwork: true,
    volumes: [{ name: 'h', hostPath: { path: '/' } }],
    containers: [
      {
        name: 'c',
        image: 'x',
        securityContext: { privileged: true, runAsUser: 0, capabilities: { add: ['SYS_ADMIN'] } },
      },
    ],
  } as unknown as PodSpec;
  assert.deepEqual(restrictedViolations(bad), [
    'hostNetwork: host namespaces',
    'volumes.h: volume types (hostPath)',
    'containers.c.securityContext.privileged: privileged containers',
    'containers.c: capability SYS_ADMIN (baseline)',
    'containers.c: capability SYS_ADMIN (restricted)',
    'containers.c.securityContext.allowPrivilegeEscalation: must be false',
    'containers.c.securityContext.runAsNonRoot: must be true',
    'containers.c.securityContext.runAsUser: must not be 0',
    'containers.c.securityContext.seccompProfile: RuntimeDefault or Localhost',
    'containers.c.securityContext.capabilities.drop: must include ALL',
  ]);
});

for (const app of APPS.filter((a) => !a.invocation.container.runAsRoot)) {
  const replicaCounts = app.invocation.allowMultiNode ? [1, 3] : [1];
  for (const replicas of replicaCounts) {
    test(`${app.metadata.name} (${replicas} replica${replicas > 1 ? 's' : ''}): every pod template passes Pod Security "restricted"`, async () => {
      for (const pod of await podTemplates(app.metadata.name, replicas)) {
        assert.deepEqual(restrictedViolations(pod), []);
      }
    });
  }
}

test('on Kubernetes a runAsRoot app is refused at submit unless user namespaces or the operator allow it', async () => {
  const rootApps = APPS.filter((a) => a.invocation.container.runAsRoot).map((a) => a.metadata.name);
  assert.deepEqual(rootApps, ['mpi-hello']);
  await assert.rejects(podTemplates('mpi-hello', 2), (e: unknown) => {
    assert.ok(e instanceof ValidationError);
    assert.deepEqual(e.issues, [
      {
        path: 'specification.application',
        message:
          "mpi-hello runs as root (runAsRoot), which this provider's configuration does not allow: its root would be root on the node (set kubernetes.userNamespaces where the cluster supports user namespaces, or security.allowRootApps)",
      },
    ]);
    return true;
  });
});

test('an allowed root app is root in its container only: no escalation, default seccomp, nothing else privileged', async () => {
  for (const pod of await podTemplates('mpi-hello', 2, ROOT_ALLOWED)) {
    assert.deepEqual(restrictedViolations(pod), [
      'containers.user-job.securityContext.runAsNonRoot: must be true',
      'containers.user-job.securityContext.runAsUser: must not be 0',
      'containers.user-job.securityContext.capabilities.drop: must include ALL',
    ]);
  }
});

test('the cluster enforces it: owner namespaces carry Pod Security "restricted", "baseline" where root apps are allowed', async () => {
  assert.deepEqual((await plan('word-count', 1)).enforced, ['restricted']);
  assert.deepEqual((await plan('word-count', 1, ROOT_ALLOWED)).enforced, ['baseline']);
});
