/**
 * The RBAC rules of the chart (deploy/helm/ucompute/files/rbac-rules.yaml, which its roles are
 * made of) against what the backend really calls: a scenario walks every code path (submit per
 * owner with a peer and a minikube Service, follow, logs, shell, port-forward, an ssh endpoint,
 * cancel, end of a job, reconciliation) on the fake API server, which records each call as
 * (verb, group, resource). Every call must be granted, and every grant used (or explained).
 * The chart's rendering is checked in test/cluster-e2e/chart.e2e.ts (it needs helm).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { backendOn } from './support/fake-kube/backend.ts';
import { eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { build, ROOT } from './support/fixtures.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** The rules of the chart's two ClusterRoles: ucompute's own (`jobs`) and the nodes' (`nodes`). */
const RULES: { jobs: Rule[]; nodes: Rule[] } = parse(
  readFileSync(join(ROOT, 'deploy/helm/ucompute/files/rbac-rules.yaml'), 'utf8'),
);

/** Granted but not called in the scenario, on purpose. */
const EXPLAINED = new Map([
  ['create //configmaps', 'a companion kind the builder may emit; no plugin does today'],
  ['delete //configmaps', 'removed with their job when there are some; no plugin emits them today'],
  ['get //pods/exec', 'API servers before 1.31 authorize WebSocket upgrades as get'],
  ['get //pods/portforward', 'API servers before 1.31 authorize WebSocket upgrades as get'],
]);

test("the chart's RBAC rules grant exactly the calls the backend makes", async (t) => {
  const cluster = await fakeCluster(t);
  const extra = { kubernetes: { minikube: true } };
  const { backend, event } = backendOn(t, cluster, extra, {
    ensureFolder: async () => {},
    writeFile: async () => {},
  });
  const web = {
    application: { name: 'file-server', version: '1.0' },
    product: { id: 'u1-standard-2', category: 'u1-standard' },
    replicas: 1,
    parameters: {},
  };
  await backend.submit('rbac1', await build(web, { id: 'rbac1', config: cluster.config(extra) }));
  cluster.volcano.admit('rbac1');
  cluster.volcano.run('rbac1');
  await event((e) => e.jobId === 'rbac1' && e.state === 'RUNNING');
  const peer = {
    application: { name: 'http-check', version: '1.0' },
    product: { id: 'u1-standard-2', category: 'u1-standard' },
    replicas: 1,
    parameters: { server: { type: 'peer', hostname: 'server', jobId: 'rbac1' } },
  };
  await backend.submit('rbac2', await build(peer, { id: 'rbac2', config: cluster.config(extra) }));
  // rbac1 had no policy of its own: rbac2 made it; a second peer patches it.
  await backend.submit('rbac4', await build(peer, { id: 'rbac4', config: cluster.config(extra) }));
  // A job with sshEnabled: its keys' Secret and its Service, whose node port is read back.
  const ssh = { ...web, application: { name: 'ssh-server', version: '1.0' } };
  await backend.submit('rbac3', await build(ssh, { id: 'rbac3', config: cluster.config(extra) }));
  cluster.volcano.admit('rbac3');
  cluster.volcano.run('rbac3');
  await event((e) => e.jobId === 'rbac3' && e.state === 'RUNNING');
  assert.equal((await backend.sshEndpoint('rbac3')).host, '127.0.0.1');
  await backend.cancel('rbac3');
  for await (const _ of backend.logs('rbac1', { follow: false })) void _;
  const shell = await backend.shell('rbac1', 0, { cols: 80, rows: 24 });
  shell.resume().write('exit\n');
  await once(shell, 'end');
  const echo = createServer((s) => s.pipe(s)).listen(0, '127.0.0.1');
  await once(echo, 'listening');
  t.after(() => echo.close());
  const address = echo.address();
  cluster.api.forwardPort(
    'ucompute-u-alice',
    'j-rbac1-job-0',
    typeof address === 'object' && address ? address.port : 0,
  );
  const stream = await backend.connect('rbac1', 0, 8080);
  stream.end();
  cluster.api.podMetrics('ucompute-u-alice', 'j-rbac1-job-0', [{ cpu: '1500m', memory: '64Mi' }]);
  assert.deepEqual((await backend.usage(['rbac1'])).get('rbac1'), [
    { rank: 0, cpuCores: 1.5, memoryBytes: 64 * 2 ** 20 },
  ]);
  cluster.volcano.finish('rbac1', [0]);
  await event((e) => e.jobId === 'rbac1' && e.state === 'SUCCESS');
  await backend.cancel('rbac2');
  await backend.cancel('rbac4');
  await backend.reconcile();
  await eventually(() => cluster.api.list('jobs').length === 0);
  assert.deepEqual(cluster.api.invalid, []);

  const rules = [...RULES.jobs, ...RULES.nodes];
  const granted = new Set(
    rules.flatMap((r) =>
      r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${v} /${g}/${res}`))),
    ),
  );
  const called = new Set(cluster.api.calls.map((c) => `${c.verb} /${c.group}/${c.resource}`));
  assert.deepEqual(
    [...called].filter((c) => !granted.has(c)),
    [],
    'calls the RBAC rules do not grant',
  );
  assert.deepEqual(
    [...granted].filter((g) => !called.has(g) && !EXPLAINED.has(g)),
    [],
    'grants the backend never uses (least privilege)',
  );
});
