import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { planJob } from '../src/jobs/plan.ts';
import type { PipelineConfig } from '../src/model/config.ts';
import type { Owner } from '../src/model/owner.ts';
import type { AppParameterValue } from '../src/model/parameter-value.ts';
import type { KubernetesObject, VolcanoJob } from '../src/volcano/api/types.ts';
import { CREATED_AT, catalog, env, JOB_ID, products } from './support/fixtures.ts';
import { assertValidKubernetesObject } from './support/kubernetes-schemas.ts';

/**
 * Every object `planJob` emits must be accepted by a strict validator built from the official
 * Kubernetes and Volcano schemas, across the example catalogue, products and configurations.
 */

const ALICE: Owner = { createdBy: 'alice' };
const CLIMATE: Owner = { createdBy: 'alice', project: 'climate' };
const PEER: AppParameterValue = { type: 'peer', hostname: 'server', jobId: 'peer1' };

/** The least each example application needs, with its files inside `drive`. */
function minimalParameters(name: string, drive: string): Record<string, AppParameterValue> {
  switch (name) {
    case 'word-count':
      return { input: { type: 'file', path: `${drive}/books/moby-dick.txt`, readOnly: true } };
    case 'http-check':
      return { server: PEER };
    case 'file-server':
    case 'mpi-hello':
    case 'terminal':
    case 'desktop':
    case 'jupyter':
    case 'ssh-server':
      return {};
    default:
      throw new Error(`no minimal parameters for ${name}: add the new example application here`);
  }
}

const APPS = catalog.list().map((r) => r.application);
const appNamed = (name: string) => {
  const found = APPS.find((a) => a.metadata.name === name);
  if (!found) throw new Error(`no example application ${name}`);
  return found;
};

function spec(name: string, extra: Record<string, unknown> = {}, owner: Owner = ALICE) {
  const app = appNamed(name);
  const drive = owner.project !== undefined ? `/projects/${owner.project}` : `/home/${owner.createdBy}`;
  return {
    application: { name, version: app.metadata.version },
    product: { id: 'u1-standard-1', category: 'u1-standard' },
    parameters: minimalParameters(name, drive),
    ...extra,
  };
}

const policyNames = (objects: KubernetesObject[]) =>
  objects.filter((o) => o.kind === 'NetworkPolicy').map((o) => o.metadata.name);

/** Plans the job and checks every object, the order, and that no two objects collide. */
async function checkPlan(
  specification: unknown,
  opts: { owner?: Owner; config?: PipelineConfig } = {},
): Promise<KubernetesObject[]> {
  const objects = await planJob(
    specification,
    { id: JOB_ID, owner: opts.owner ?? ALICE, createdAt: CREATED_AT },
    env(opts.config),
  );
  assert.ok(objects.length >= 2, "the Volcano Job and at least its namespace's isolation policy");
  assert.equal(objects[0]?.apiVersion, 'batch.volcano.sh/v1alpha1');
  assert.equal(objects[0]?.kind, 'Job');
  assert.equal(objects[0]?.metadata.name, `j-${JOB_ID}`);
  for (const object of objects) assertValidKubernetesObject(object);
  const keys = objects.map((o) => `${o.kind} ${o.metadata.namespace ?? '(cluster)'}/${o.metadata.name}`);
  assert.deepEqual(
    keys.filter((k, i) => keys.indexOf(k) !== i),
    [],
    `objects share a kind, namespace and name: ${keys.join(', ')}`,
  );
  return objects;
}

test('the minimal parameters cover every example application', () => {
  assert.deepEqual(APPS.map((a) => a.metadata.name).sort(), [
    'desktop',
    'file-server',
    'http-check',
    'jupyter',
    'mpi-hello',
    'ssh-server',
    'terminal',
    'word-count',
  ]);
  assert.equal(products.length, 5);
});

describe('every application × every product × replicas × time limit', () => {
  const TIME = { hours: 2, minutes: 15, seconds: 30 };
  for (const app of APPS) {
    const replicaCounts = app.invocation.allowMultiNode ? [1, 3] : [1];
    for (const product of products) {
      for (const replicas of replicaCounts) {
        for (const timeAllocation of [TIME, null]) {
          const name = `${app.metadata.name} on ${product.id}, ${replicas} replica${replicas > 1 ? 's' : ''}, ${timeAllocation ? 'with' : 'without'} a time limit`;
          test(name, async () => {
            const objects = await checkPlan(
              spec(app.metadata.name, {
                product: { id: product.id, category: product.category, provider: 'ucompute' },
                replicas,
                timeAllocation,
              }),
            );
            // An app with ssh MANDATORY has its keys and its SSH Service too; replicas, ssh or peers
            // give the job a policy of its own beside the namespace's isolation policy.
            const ssh = app.invocation.ssh.mode === 'MANDATORY';
            const peers = objects[0]?.metadata.annotations?.['ucompute.dev/peers'] !== undefined;
            assert.deepEqual(policyNames(objects), [
              'job-isolation',
              ...(replicas > 1 || ssh || peers ? [`policy-${JOB_ID}`] : []),
            ]);
            assert.deepEqual(
              objects.map((o) => o.kind).filter((k) => k !== 'NetworkPolicy'),
              ['Job', 'Namespace', 'Queue', ...(ssh ? ['Secret', 'Service'] : [])],
            );
          });
        }
      }
    }
  }
});

test('the interactive examples run common public images on a cluster, Jupyter with flags of Notebook 6 and 7', async () => {
  const images: Record<string, string | undefined> = {};
  for (const name of ['jupyter', 'desktop', 'terminal']) {
    const [job] = await checkPlan(spec(name));
    const container = (job as VolcanoJob).spec.tasks[0]?.template.spec.containers[0];
    images[name] = container?.image;
    if (name === 'jupyter') {
      // Debian's Notebook 6 reads NotebookApp's settings; the image's Notebook 7 is a Jupyter Server app.
      for (const flag of [
        '--NotebookApp.token=',
        '--ServerApp.token=',
        '--ServerApp.allow_remote_access=True',
      ])
        assert.ok(container?.command?.includes(flag), flag);
    }
  }
  assert.deepEqual(images, {
    jupyter: 'quay.io/jupyter/base-notebook:notebook-7.2.2',
    desktop: 'docker.io/consol/debian-xfce-vnc:v2.0.4',
    terminal: 'debian:bookworm-slim',
  });
});

describe('peers, extra folders and opened files', () => {
  test('http-check with a peer job', async () => {
    const objects = await checkPlan(spec('http-check'));
    assert.match(objects[0]?.metadata.annotations?.['ucompute.dev/peers'] ?? '', /peer1/);
  });

  test('http-check with a parameter peer and a resource peer', async () => {
    await checkPlan(spec('http-check', { resources: [{ type: 'peer', hostname: 'cache', jobId: 'peer2' }] }));
  });

  const mountingApps = APPS.filter((a) => a.invocation.allowAdditionalMounts);
  test('some example applications allow additional folders', () => {
    assert.deepEqual(mountingApps.map((a) => a.metadata.name).sort(), [
      'desktop',
      'file-server',
      'jupyter',
      'terminal',
    ]);
  });
  for (const app of mountingApps) {
    test(`${app.metadata.name} with extra file resources`, async () => {
      await checkPlan(
        spec(app.metadata.name, {
          resources: [
            { type: 'file', path: '/home/alice/data', readOnly: true },
            { type: 'file', path: '/home/alice/My Files/results (2024)' },
            { type: 'peer', hostname: 'db', jobId: 'peer3' },
          ],
        }),
      );
    });
  }

  test('desktop opened with a file', async () => {
    await checkPlan(spec('desktop', { openedFile: '/home/alice/notes/todo list.txt' }));
  });

  test('file-server serving a folder', async () => {
    await checkPlan(
      spec('file-server', { parameters: { folder: { type: 'file', path: '/home/alice/site' } } }),
    );
  });
});

describe('owners and configurations', () => {
  const configs: [string, PipelineConfig][] = [
    [
      'single namespace',
      { kubernetes: { namespaceStrategy: 'single', namespace: 'batch', queue: 'research' } },
    ],
    ['minikube', { kubernetes: { minikube: true } }],
    [
      'everything configured',
      {
        provider: 'ucompute',
        prefix: 'lab',
        jobUid: 5000,
        kubernetes: {
          storageClaim: 'cephfs',
          storageSubPath: 'ucompute/data',
          imagePullSecrets: ['regcred'],
          helperImage: 'registry.example.org/tools/busybox:1.36',
          serviceNamespace: 'platform',
          minikube: true,
          allowInternet: false,
          tolerations: {
            'u1-gpu': [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
            'u1-secure': [{ key: 'kata', operator: 'Equal', value: 'yes', effect: 'NoExecute' }],
          },
        },
        fairShare: { weights: { 'user:alice': 2, 'project:climate': 4 }, defaultWeight: 3 },
      },
    ],
  ];

  for (const app of APPS) {
    const name = app.metadata.name;
    const replicas = app.invocation.allowMultiNode ? 3 : 1;

    test(`${name} in a project`, async () => {
      const objects = await checkPlan(spec(name, { replicas }, CLIMATE), { owner: CLIMATE });
      assert.equal(objects[0]?.metadata.namespace, 'ucompute-p-climate');
    });

    test(`${name} for a user whose name is not a DNS label`, async () => {
      const owner = { createdBy: 'alice.smith_2' };
      await checkPlan(spec(name, { replicas }, owner), { owner });
    });

    for (const [label, config] of configs) {
      test(`${name} with the ${label} configuration`, async () => {
        const objects = await checkPlan(spec(name, { replicas }), { config });
        const ssh = app.invocation.ssh.mode === 'MANDATORY';
        if (config.kubernetes?.minikube) {
          const services = objects.filter((o) => o.kind === 'Service' && !o.metadata.name.endsWith('-ssh'));
          assert.equal(services.length, app.invocation.applicationType === 'BATCH' ? 0 : 1);
        }
        if (config.kubernetes?.namespaceStrategy === 'single') {
          assert.deepEqual(
            objects.map((o) => o.kind).filter((k) => k !== 'NetworkPolicy'),
            [
              'Job',
              ...(ssh ? ['Secret', 'Service'] : []),
              ...(config.kubernetes.minikube ? ['Service'] : []),
            ],
          );
          assert.equal(policyNames(objects)[0], 'job-isolation');
          for (const o of objects) assert.equal(o.metadata.namespace, 'batch');
        }
      });
    }

    for (const product of products) {
      test(`${name} on ${product.id} in a project with everything configured`, async () => {
        await checkPlan(
          spec(name, { replicas, product: { id: product.id, category: product.category } }, CLIMATE),
          {
            owner: CLIMATE,
            config: configs[2]![1],
          },
        );
      });
    }
  }
});
