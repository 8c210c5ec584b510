/**
 * The Helm chart deploy/helm/ucompute, with the helm that `scripts/cluster.sh build` makes from its
 * Go module: `helm lint` finds nothing, its rendering is valid against the Kubernetes OpenAPI
 * schemas of the fixtures (where they have the kind) and applies to the real API server with
 * `kubectl apply --dry-run=server` (every kind, strictly), for a one-replica SQLite release and a
 * three-replica PostgreSQL one with TLS, products and a catalogue from ConfigMaps.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { buildCatalog } from '../../src/catalog/catalog.ts';
import { parseProducts } from '../../src/catalog/products.ts';
import { Config } from '../../src/config/config.ts';
import { parser } from '../../src/model/validate.ts';
import { ROOT } from '../support/fixtures.ts';
import { kubernetesObjectProblems } from '../support/kubernetes-schemas.ts';
import { CLUSTER_DIR, kubectl, skip } from './cluster.ts';

const run = promisify(execFile);
const CHART = join(ROOT, 'deploy/helm/ucompute');
/** A namespace of this test's own (the harness's `ucompute` holds the chart's account already). */
const NAMESPACE = 'ucompute-chart-e2e';

/** Three replicas on PostgreSQL, TLS, the example products and two apps with their tools as the catalogue. */
const HA = [
  '--set',
  'replicas=3,store.postgres.secretName=ucompute-postgres,ingress.tls.secretName=ucompute-tls',
  '--set',
  'ingress.tls.sessionsSecretName=apps-wildcard-tls,kubernetes.namespaceStrategy=per-owner',
  '--set-file',
  `products=${join(ROOT, 'examples/products.yml')}`,
  '--set-file',
  `catalog.word-count\\.yml=${join(ROOT, 'examples/apps/word-count.yml')}`,
  '--set-file',
  `catalog.mpi-hello\\.yml=${join(ROOT, 'examples/apps/mpi-hello.yml')}`,
  '--set-file',
  `catalog.tools\\.yml=${join(ROOT, 'examples/apps/tools.yml')}`,
];

async function helm(args: string[]): Promise<string> {
  const bin = (await readFile(join(CLUSTER_DIR, 'run', 'helm'), 'utf8')).trim();
  return (await run(bin, args, { maxBuffer: 16 << 20 })).stdout;
}

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are free-form YAML.
type Manifest = any;

async function render(values: string[]): Promise<{ text: string; objects: Manifest[] }> {
  const text = await helm(['template', 'ucompute', CHART, '--namespace', NAMESPACE, ...values]);
  return {
    text,
    objects: parseAllDocuments(text)
      .map((d) => d.toJS())
      .filter(Boolean),
  };
}

const find = (objects: Manifest[], kind: string, name?: string) =>
  objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));

before(async () => {
  if (!skip) await kubectl(['create', 'namespace', NAMESPACE]);
});
after(async () => {
  if (!skip) await kubectl(['delete', 'namespace', NAMESPACE, '--wait=false']);
});

test('helm lint finds nothing (default values; three replicas on PostgreSQL)', { skip }, async () => {
  for (const values of [[], HA]) {
    const out = await helm(['lint', '--strict', CHART, ...values]);
    assert.match(out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    assert.doesNotMatch(out, /\[(WARNING|ERROR)\]/, out);
  }
});

test('the rendering: valid by the OpenAPI schemas, its config loads, its roles are the rules', {
  skip,
}, async () => {
  const rules = parse(await readFile(join(CHART, 'files/rbac-rules.yaml'), 'utf8'));
  for (const values of [[], HA]) {
    const { objects } = await render(values);
    const deployment = find(objects, 'Deployment');
    // The fixtures have the core and networking groups: every such object, and the pod template as a Pod.
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'ucompute-0', namespace: NAMESPACE, ...deployment.spec.template.metadata },
      spec: deployment.spec.template.spec,
    };
    const checked = [...objects.filter((o) => ['v1', 'networking.k8s.io/v1'].includes(o.apiVersion)), pod];
    assert.ok(checked.length >= 6, JSON.stringify(checked.map((o) => o.kind)));
    for (const o of checked)
      assert.deepEqual(kubernetesObjectProblems(o), [], `${o.kind} ${o.metadata.name}`);

    const configMap = find(objects, 'ConfigMap', 'ucompute-config');
    const config = parse(configMap.data['config.yml']);
    const check = parser(Config);
    assert.ok(check.check(config), JSON.stringify(check.issues(config)));
    // The jobs' network policies let the session proxy in by this label, from this namespace.
    assert.equal(deployment.spec.template.metadata.labels['app.kubernetes.io/name'], 'ucompute');
    assert.equal(config.kubernetes?.serviceNamespace, NAMESPACE);
    assert.equal(config.kubernetes?.storageClaim, 'ucompute-storage');
    assert.deepEqual(find(objects, 'ClusterRole', 'ucompute').rules, rules.jobs);
    assert.deepEqual(find(objects, 'ClusterRole', 'ucompute-nodes').rules, rules.nodes);
    const probes = deployment.spec.template.spec.containers[0];
    assert.equal(probes.readinessProbe.httpGet.path, '/readyz');
    assert.equal(probes.livenessProbe.httpGet.path, '/healthz');
  }
});

test('three replicas: store URL from a Secret, rolling, TLS, products and catalogue', { skip }, async () => {
  const { objects } = await render(HA);
  const deployment = find(objects, 'Deployment');
  const container = deployment.spec.template.spec.containers[0];
  assert.equal(deployment.spec.replicas, 3);
  assert.equal(deployment.spec.strategy.type, 'RollingUpdate');
  assert.deepEqual(container.args.slice(-2), ['--store', '$(UCOMPUTE_STORE_URL)']);
  assert.deepEqual(container.env[0].valueFrom.secretKeyRef, { name: 'ucompute-postgres', key: 'url' });
  assert.deepEqual(
    objects.filter((o) => o.kind === 'PersistentVolumeClaim').map((o) => o.metadata.name),
    ['ucompute-storage'],
  );
  const ingress = find(objects, 'Ingress');
  assert.deepEqual(ingress.spec.tls, [
    { hosts: ['ucompute.example.org'], secretName: 'ucompute-tls' },
    { hosts: ['*.apps.example.org'], secretName: 'apps-wildcard-tls' },
  ]);
  assert.equal(ingress.spec.ingressClassName, 'nginx');
  assert.equal(find(objects, 'ClusterRoleBinding', 'ucompute').roleRef.name, 'ucompute');
  const config = parse(find(objects, 'ConfigMap', 'ucompute-config').data['config.yml']);
  assert.equal(config.server.publicUrl, 'https://ucompute.example.org');
  assert.deepEqual([config.products, config.apps], ['/etc/ucompute/products.yml', '/etc/ucompute-apps']);
  assert.ok(parseProducts(find(objects, 'ConfigMap', 'ucompute-config').data['products.yml']).length > 0);
  const catalog = find(objects, 'ConfigMap', 'ucompute-catalog').data;
  const built = buildCatalog(Object.entries(catalog).map(([path, text]) => ({ path, text: text as string })));
  assert.deepEqual(built.issues, []);
  assert.equal(find(objects, 'PodDisruptionBudget').spec.maxUnavailable, 1);
});

test('more than one replica without PostgreSQL is refused', { skip }, async () => {
  await assert.rejects(render(['--set', 'replicas=2']), /replicas > 1 needs store.postgres.secretName/);
});

test('the rendering applies to the real API server (kubectl apply --dry-run=server)', { skip }, async () => {
  for (const values of [[], HA]) {
    const { text, objects } = await render(values);
    const out = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: text });
    for (const o of objects) {
      const kind = o.kind.toLowerCase();
      assert.match(
        out,
        new RegExp(`^${kind}[.a-z0-9/]*/${o.metadata.name} \\w+ \\(server dry run\\)$`, 'm'),
        out,
      );
    }
  }
});
