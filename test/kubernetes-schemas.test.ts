import { AssertionError } from 'node:assert';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertValidKubernetesObject, kubernetesObjectProblems } from './support/kubernetes-schemas.ts';

// Builders return fresh objects so each test can break one thing.

function volcanoJob() {
  const labels = { 'app.kubernetes.io/managed-by': 'ucompute', 'ucompute.io/job-id': 'j-7f3a' };
  return {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    metadata: {
      name: 'train-7f3a',
      namespace: 'ucompute-alice',
      labels,
      annotations: { 'ucompute.io/submitted-by': 'alice@example.org' },
    },
    spec: {
      schedulerName: 'volcano',
      queue: 'research',
      minAvailable: 2,
      maxRetry: 0,
      ttlSecondsAfterFinished: 3600,
      policies: [{ event: 'PodFailed', action: 'TerminateJob' }],
      plugins: { env: [], svc: [], ssh: [] },
      tasks: [
        {
          name: 'worker',
          replicas: 2,
          minAvailable: 2,
          policies: [{ event: 'TaskCompleted', action: 'CompleteJob' }],
          template: {
            metadata: { labels: { ...labels, 'ucompute.io/task': 'worker' } },
            spec: {
              restartPolicy: 'Never',
              hostAliases: [{ ip: '10.0.0.5', hostnames: ['storage.internal'] }],
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 1000,
                fsGroup: 1000,
                seccompProfile: { type: 'RuntimeDefault' },
              },
              containers: [
                {
                  name: 'main',
                  image: 'ghcr.io/example/trainer:1.2.0',
                  imagePullPolicy: 'IfNotPresent',
                  command: ['python', 'train.py'],
                  args: ['--epochs', '10'],
                  workingDir: '/workspace',
                  env: [
                    { name: 'EPOCHS', value: '10' },
                    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                    { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'train-7f3a', key: 'token' } } },
                  ],
                  ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
                  resources: {
                    requests: { cpu: '500m', memory: '2Gi' },
                    limits: { cpu: '2', memory: '4Gi', 'nvidia.com/gpu': '1', 'ephemeral-storage': '1e3' },
                  },
                  volumeMounts: [
                    { name: 'shm', mountPath: '/dev/shm' },
                    { name: 'data', mountPath: '/data', readOnly: true },
                  ],
                  securityContext: {
                    allowPrivilegeEscalation: false,
                    readOnlyRootFilesystem: true,
                    capabilities: { drop: ['ALL'] },
                  },
                },
              ],
              volumes: [
                { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '1Gi' } },
                { name: 'data', persistentVolumeClaim: { claimName: 'alice-data', readOnly: true } },
              ],
            },
          },
        },
      ],
    },
  };
}

function namespace() {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'ucompute-alice', labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
  };
}

function networkPolicy() {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'train-7f3a', namespace: 'ucompute-alice' },
    spec: {
      podSelector: { matchLabels: { 'ucompute.io/job-id': 'j-7f3a' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          from: [
            { podSelector: { matchLabels: { 'ucompute.io/job-id': 'j-7f3a' } } },
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
          ],
          ports: [{ protocol: 'TCP', port: 8080 }, { port: 'http' }],
        },
      ],
      egress: [
        { to: [{ podSelector: {} }] },
        {
          to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '169.254.169.254/32'] } }],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 443 },
          ],
        },
      ],
    },
  };
}

function headlessService() {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'train-7f3a', namespace: 'ucompute-alice' },
    spec: {
      clusterIP: 'None',
      selector: { 'ucompute.io/job-id': 'j-7f3a' },
      publishNotReadyAddresses: true,
      ports: [{ name: 'ssh', port: 22, targetPort: 22, protocol: 'TCP' }],
    },
  };
}

function loadBalancerService() {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: 'notebook-alice',
      namespace: 'ucompute-alice',
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb' },
    },
    spec: {
      type: 'LoadBalancer',
      selector: { 'ucompute.io/job-id': 'j-7f3a' },
      ports: [{ name: 'https', port: 443, targetPort: 'http', protocol: 'TCP' }],
      externalTrafficPolicy: 'Local',
      loadBalancerSourceRanges: ['203.0.113.0/24'],
    },
  };
}

function configMap() {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'train-7f3a.config', namespace: 'ucompute-alice' },
    data: { 'config.yaml': 'epochs: 10\n', RUN_MODE: 'batch' },
    binaryData: { 'logo.png': 'iVBORw0KGgo=' },
  };
}

function secret() {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'train-7f3a', namespace: 'ucompute-alice' },
    type: 'Opaque',
    data: { token: 'c2VjcmV0LXRva2Vu' },
    stringData: { 'user.name': 'alice' },
  };
}

function queue() {
  return {
    apiVersion: 'scheduling.volcano.sh/v1beta1',
    kind: 'Queue',
    metadata: { name: 'research' },
    spec: { weight: 4, reclaimable: true, capability: { cpu: '64', memory: '256Gi', 'nvidia.com/gpu': 8 } },
  };
}

function podGroup() {
  return {
    apiVersion: 'scheduling.volcano.sh/v1beta1',
    kind: 'PodGroup',
    metadata: { name: 'train-7f3a', namespace: 'ucompute-alice' },
    spec: { minMember: 2, queue: 'research', minResources: { cpu: '1', memory: '4Gi' } },
  };
}

function pod() {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'debug', namespace: 'ucompute-alice', creationTimestamp: null },
    spec: {
      restartPolicy: 'Never',
      containers: [{ name: 'c', image: 'busybox:1.36', resources: { limits: { cpu: 0.5, memory: '64Mi' } } }],
    },
  };
}

type Obj = Record<string, unknown>;
// Reach into nested test objects without fighting the builders' literal types.
function at(value: unknown, ...path: (string | number)[]): Obj {
  let current = value;
  for (const step of path) current = (current as Obj)[step];
  return current as Obj;
}

const CONTAINER = 'spec.tasks[0].template.spec.containers[0]';

describe('valid objects pass', () => {
  const cases: [string, () => unknown][] = [
    ['Volcano Job', volcanoJob],
    ['Namespace', namespace],
    ['NetworkPolicy', networkPolicy],
    ['headless Service', headlessService],
    ['LoadBalancer Service', loadBalancerService],
    ['ConfigMap', configMap],
    ['Secret', secret],
    ['Volcano Queue', queue],
    ['Volcano PodGroup', podGroup],
    ['Pod with null creationTimestamp and numeric quantity', pod],
  ];
  for (const [name, build] of cases) {
    test(name, () => {
      assert.deepEqual(kubernetesObjectProblems(build()), []);
      assertValidKubernetesObject(build());
    });
  }

  test('validation does not apply defaults or otherwise mutate the object', () => {
    const job = volcanoJob();
    const before = structuredClone(job);
    kubernetesObjectProblems(job);
    assert.deepEqual(job, before);
  });
});

describe('problems are caught', () => {
  test('unknown field at top level', () => {
    const job: Obj = volcanoJob();
    job.extra = true;
    assert.deepEqual(kubernetesObjectProblems(job), ['extra: is not a known field']);
  });

  test('unknown field deep inside a container', () => {
    const job = volcanoJob();
    at(job, 'spec', 'tasks', 0, 'template', 'spec', 'containers', 0).resource = { limits: {} };
    assert.deepEqual(kubernetesObjectProblems(job), [`${CONTAINER}.resource: is not a known field`]);
  });

  test('unknown field in core objects, nested under allOf/$ref', () => {
    const service = headlessService();
    at(service, 'spec', 'ports', 0).portName = 'ssh';
    const policy = networkPolicy();
    at(policy, 'spec', 'egress', 1, 'to', 0, 'ipBlock').exclude = [];
    assert.deepEqual(kubernetesObjectProblems(service), ['spec.ports[0].portName: is not a known field']);
    assert.deepEqual(kubernetesObjectProblems(policy), [
      'spec.egress[1].to[0].ipBlock.exclude: is not a known field',
    ]);
  });

  test('unknown metadata field on a CRD object (checked as ObjectMeta)', () => {
    const job = volcanoJob();
    at(job, 'metadata').label = { a: 'b' };
    assert.deepEqual(kubernetesObjectProblems(job), ['metadata.label: is not a known field']);
  });

  test('wrong type', () => {
    const job = volcanoJob();
    at(job, 'spec', 'tasks', 0).replicas = '2';
    assert.deepEqual(kubernetesObjectProblems(job), ['spec.tasks[0].replicas: must be an integer (got "2")']);
  });

  test('minimum and int32 range', () => {
    const job = volcanoJob();
    at(job, 'spec', 'tasks', 0).replicas = -1;
    at(job, 'spec').ttlSecondsAfterFinished = 2 ** 31;
    assert.deepEqual(kubernetesObjectProblems(job), [
      'spec.tasks[0].replicas: must be >= 0 (got number -1)',
      'spec.ttlSecondsAfterFinished: must be a 32-bit integer (got number 2147483648)',
    ]);
  });

  test('missing required field', () => {
    const job = volcanoJob();
    delete at(job, 'spec', 'tasks', 0, 'template', 'spec', 'containers', 0).name;
    assert.deepEqual(kubernetesObjectProblems(job), [`${CONTAINER}.name: is required`]);
    const service = headlessService();
    delete at(service, 'spec', 'ports', 0).port;
    assert.deepEqual(kubernetesObjectProblems(service), ['spec.ports[0].port: is required']);
  });

  test('bad enum in a built-in schema (from the Go types; the published OpenAPI has no enums)', () => {
    const policy = networkPolicy();
    at(policy, 'spec').policyTypes = ['Sideways'];
    assert.deepEqual(kubernetesObjectProblems(policy), [
      'spec.policyTypes[0]: must be one of "Ingress", "Egress" (got "Sideways")',
    ]);
  });

  test('bad enum in a CRD schema and in a Volcano pod template', () => {
    const job = volcanoJob();
    at(job, 'spec', 'policies', 0).event = 'PodFail';
    at(job, 'spec', 'tasks', 0, 'template', 'spec').restartPolicy = 'Sometimes';
    const problems = kubernetesObjectProblems(job);
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(
      problems[0]!,
      /^spec\.policies\[0\]\.event: must be one of "\*", "PodPending", .* \(got "PodFail"\)$/,
    );
    assert.match(
      problems[1]!,
      /^spec\.tasks\[0\]\.template\.spec\.restartPolicy: must be one of .* \(got "Sometimes"\)$/,
    );
  });

  test('bad quantity, in a CRD and in a built-in object', () => {
    const job = volcanoJob();
    at(job, 'spec', 'tasks', 0, 'template', 'spec', 'containers', 0, 'resources', 'limits').memory = '2 GB';
    assert.deepEqual(kubernetesObjectProblems(job), [
      `${CONTAINER}.resources.limits.memory: must be a Kubernetes quantity such as "500m", "2Gi", "1.5" or "1e3" (got "2 GB")`,
    ]);
    const p = pod();
    at(p, 'spec', 'containers', 0, 'resources', 'limits')['nvidia.com/gpu'] = 'one';
    assert.deepEqual(kubernetesObjectProblems(p), [
      'spec.containers[0].resources.limits["nvidia.com/gpu"]: must be a Kubernetes quantity such as "500m", "2Gi", "1.5" or "1e3" (got "one")',
    ]);
  });

  test('int-or-string accepts integers and strings only', () => {
    const service = loadBalancerService();
    at(service, 'spec', 'ports', 0).targetPort = true;
    assert.deepEqual(kubernetesObjectProblems(service), [
      'spec.ports[0].targetPort: must be an integer or a string (got boolean true)',
    ]);
  });

  test('bad metadata name', () => {
    const cm: Obj = configMap();
    at(cm, 'metadata').name = 'Foo_Bar';
    assert.deepEqual(kubernetesObjectProblems(cm), [
      'metadata.name: must be a DNS-1123 subdomain (lowercase alphanumerics, "-" and ".") (got "Foo_Bar")',
    ]);
    const ns = namespace();
    at(ns, 'metadata').name = 'a.b';
    assert.match(kubernetesObjectProblems(ns).join('\n'), /^metadata\.name: must be a DNS-1123 label/);
    const service = headlessService();
    at(service, 'metadata').name = '7f3a';
    assert.match(kubernetesObjectProblems(service).join('\n'), /^metadata\.name: must be a DNS-1035 label/);
  });

  test('missing metadata name, bad namespace, namespace on a cluster-scoped kind', () => {
    const secretObject = secret();
    delete (at(secretObject, 'metadata') as { name?: string }).name;
    assert.deepEqual(kubernetesObjectProblems(secretObject), ['metadata.name: is required']);
    const job = volcanoJob();
    at(job, 'metadata').namespace = 'Alice';
    assert.match(kubernetesObjectProblems(job).join('\n'), /^metadata\.namespace: must be a DNS-1123 label/);
    const q = queue();
    at(q, 'metadata').namespace = 'default';
    assert.deepEqual(kubernetesObjectProblems(q), [
      'metadata.namespace: must not be set, Queue is cluster-scoped',
    ]);
  });

  test('bad label value, label key, and selector values', () => {
    const job = volcanoJob();
    at(job, 'metadata', 'labels')['ucompute.io/owner'] = 'alice@example.org';
    at(job, 'spec', 'tasks', 0, 'template', 'metadata', 'labels')['-bad-key'] = 'x';
    assert.deepEqual(kubernetesObjectProblems(job), [
      'metadata.labels["ucompute.io/owner"]: label value must be empty or alphanumerics, "-", "_" or ".", starting and ending alphanumeric (got "alice@example.org")',
      'spec.tasks[0].template.metadata.labels["-bad-key"]: invalid label key: name part must consist of alphanumerics, "-", "_" or ".", starting and ending alphanumeric',
    ]);
    const long = networkPolicy();
    at(long, 'spec', 'podSelector', 'matchLabels')['ucompute.io/job-id'] = 'x'.repeat(64);
    assert.deepEqual(kubernetesObjectProblems(long), [
      'spec.podSelector.matchLabels["ucompute.io/job-id"]: label value must be at most 63 characters (got 64)',
    ]);
    const service = headlessService();
    at(service, 'spec', 'selector').app = 'a b';
    assert.match(kubernetesObjectProblems(service).join('\n'), /^spec\.selector\.app: label value must be/);
  });

  test('unknown kind and unknown apiVersion', () => {
    assert.deepEqual(
      kubernetesObjectProblems({ apiVersion: 'v1', kind: 'Deployment', metadata: { name: 'x' } }),
      ['kind: "Deployment" is not a known kind of apiVersion "v1"'],
    );
    assert.match(
      kubernetesObjectProblems({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' } }).join(
        '\n',
      ),
      /^apiVersion: "apps\/v1" is not a known apiVersion \(known: v1, networking\.k8s\.io\/v1, /,
    );
    assert.deepEqual(kubernetesObjectProblems({ kind: 'Pod' }), ['apiVersion: is required']);
    assert.deepEqual(kubernetesObjectProblems('Pod'), ['(root): must be an object (got "Pod")']);
  });

  test('duplicate keys in a CRD list-map (x-kubernetes-list-map-keys), with defaults applied to keys', () => {
    const job = volcanoJob();
    const container = at(job, 'spec', 'tasks', 0, 'template', 'spec', 'containers', 0);
    container.ports = [{ containerPort: 8080, protocol: 'TCP' }, { containerPort: 8080 }];
    assert.deepEqual(kubernetesObjectProblems(job), [
      `${CONTAINER}.ports[1]: duplicate entry: containerPort=8080, protocol="TCP" is already used by item [0]`,
    ]);
  });

  test('Secret data must be base64 and ConfigMap keys must be valid', () => {
    const s = secret();
    at(s, 'data').token = 'not base64!';
    assert.deepEqual(kubernetesObjectProblems(s), ['data.token: must be base64-encoded (got "not base64!")']);
    const cm = configMap();
    at(cm, 'data')['conf/app.yaml'] = 'x';
    assert.deepEqual(kubernetesObjectProblems(cm), [
      'data["conf/app.yaml"]: key must consist of alphanumerics, "-", "_" or "." (got "conf/app.yaml")',
    ]);
  });

  test('assertValidKubernetesObject throws an AssertionError listing the problems', () => {
    const job: Obj = volcanoJob();
    job.extra = 1;
    at(job, 'spec', 'tasks', 0).replicas = '2';
    assert.throws(
      () => assertValidKubernetesObject(job),
      (error: unknown) => {
        assert.ok(error instanceof AssertionError);
        assert.match(error.message, /^Job "train-7f3a" is not a valid Kubernetes object:/);
        assert.match(error.message, /\n {2}- extra: is not a known field/);
        assert.match(error.message, /\n {2}- spec\.tasks\[0\]\.replicas: must be an integer/);
        return true;
      },
    );
  });
});
