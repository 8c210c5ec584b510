import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backendOn, eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { build } from './support/fixtures.ts';

const MPI = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 3,
  parameters: {},
};

test('submit creates the namespace, queue and policy, then the Volcano Job; the job runs and finishes', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  const b = await build(MPI, { id: 'job1', config: cluster.config() });
  await backend.submit('job1', b);
  assert.deepEqual(cluster.api.invalid, []);
  const created = cluster.api.calls.filter((c) => c.verb === 'create').map((c) => c.resource);
  assert.deepEqual(created, ['namespaces', 'queues', 'networkpolicies', 'jobs']);
  await event((e) => e.jobId === 'job1' && e.state === 'IN_QUEUE');
  cluster.volcano.unschedulable('job1', '3/3 tasks in gang unschedulable: pod group is not ready');
  await event((e) => e.status.includes('3/3 tasks in gang unschedulable'));
  cluster.volcano.admit('job1');
  cluster.volcano.run('job1');
  const running = await event((e) => e.state === 'RUNNING');
  assert.match(running.status, /running \(3\/3 ready\)/);
  cluster.volcano.finish('job1', [0, 0, 0]);
  const done = await event((e) => e.state === 'SUCCESS');
  assert.deepEqual(done.exitCodes, { '0': 0, '1': 0, '2': 0 });
  await eventually(
    () => cluster.api.list('jobs').length === 0 && cluster.api.list('networkpolicies').length === 0,
  );
});
