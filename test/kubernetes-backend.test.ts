import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { JOB_ISOLATION_POLICY } from '../src/volcano/names.ts';
import { backendOn } from './support/fake-kube/backend.ts';
import { eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { build } from './support/fixtures.ts';

const MPI = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 3,
  parameters: {},
};
const ONE = { ...MPI, replicas: 1 };

/** Names of the job-specific objects (not the namespace's isolation policy) left on the fake cluster (jobs, policies, services, secrets, config maps). */
function leftovers(api: Awaited<ReturnType<typeof fakeCluster>>['api']): string[] {
  return ['jobs', 'networkpolicies', 'services', 'secrets', 'configmaps', 'pods'].flatMap((p) =>
    api
      .list(p)
      .filter((o) => !(p === 'networkpolicies' && o.metadata.name === JOB_ISOLATION_POLICY))
      .map((o) => `${p}/${o.metadata.namespace}/${o.metadata.name}`),
  );
}

/**
 * Runs a new job `id` and waits for its RUNNING: the backend has then followed the cluster past
 * every change made before (its Volcano Job and pods come on the same watches, later), and said
 * what those changes made it say. A "nothing more was reported" check is sound after it.
 */
async function runningAfter(
  cluster: Awaited<ReturnType<typeof fakeCluster>>,
  { backend, event }: ReturnType<typeof backendOn>,
  id: string,
): Promise<void> {
  await backend.submit(id, await build(ONE, { id, config: cluster.config() }));
  cluster.volcano.admit(id);
  cluster.volcano.run(id);
  await event((e) => e.jobId === id && e.state === 'RUNNING');
}

test('submit creates namespace, queue, policies and then the Volcano Job, all valid; the job runs and its objects go at the end', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  const b = await build(MPI, { id: 'job1', config: cluster.config() });
  await backend.submit('job1', b);
  assert.deepEqual(cluster.api.invalid, []);
  const created = cluster.api.calls.filter((c) => c.verb === 'create').map((c) => c.resource);
  // The namespace's isolation policy, then the job's own (its 3 replicas reach each other).
  assert.deepEqual(created, ['namespaces', 'queues', 'networkpolicies', 'networkpolicies', 'jobs']);
  const vcjob = cluster.api.get('jobs', 'ucompute-u-alice', 'j-job1');
  assert.equal(vcjob.spec.queue, 'ucompute-u-alice');
  await event((e) => e.jobId === 'job1' && e.state === 'IN_QUEUE');
  cluster.volcano.unschedulable('job1', '3/3 tasks in gang unschedulable: pod group is not ready');
  await event(
    (e) =>
      e.status === 'The job is waiting in the queue: 3/3 tasks in gang unschedulable: pod group is not ready',
  );
  cluster.volcano.admit('job1');
  cluster.volcano.run('job1');
  assert.equal((await event((e) => e.state === 'RUNNING')).status, 'The job is running (3/3 ready)');
  cluster.volcano.finish('job1', [0, 2, 0]);
  const done = await event((e) => e.state === 'SUCCESS');
  assert.deepEqual(done.exitCodes, { '0': 0, '1': 2, '2': 0 });
  assert.match(done.status, /non-zero exit codes \(rank 1: 2\)/);
  await eventually(() => leftovers(cluster.api).length === 0);
  // A second job of the same owner does not create its namespace and queue again.
  await backend.submit('job2', await build(ONE, { id: 'job2', config: cluster.config() }));
  assert.equal(cluster.api.calls.filter((c) => c.verb === 'create' && c.resource === 'namespaces').length, 1);
  // A repeated submit is harmless.
  await eventually(async () => (await backend.knownJobs()).has('job2'));
  await backend.submit('job2', await build(ONE, { id: 'job2', config: cluster.config() }));
  assert.equal(cluster.api.list('jobs').length, 1);
});

test('the single strategy puts everything in the configured namespace and queue, with node selectors, tolerations, runtime class and pull secrets', async (t) => {
  const cluster = await fakeCluster(t);
  const extra = {
    kubernetes: {
      namespaceStrategy: 'single' as const,
      namespace: 'ucompute-jobs',
      queue: 'research',
      imagePullSecrets: ['registry'],
      nodeSelectors: { 'u1-standard': { 'ucompute.dev/machine': 'standard' } },
      tolerations: {
        'u1-standard': [
          { key: 'dedicated', operator: 'Equal' as const, value: 'jobs', effect: 'NoSchedule' as const },
        ],
      },
    },
  };
  const { backend } = backendOn(t, cluster, extra);
  await backend.submit('s1', await build(ONE, { id: 's1', config: cluster.config(extra) }));
  assert.deepEqual(cluster.api.invalid, []);
  const vcjob = cluster.api.get('jobs', 'ucompute-jobs', 'j-s1');
  assert.equal(vcjob.spec.queue, 'research');
  const pod = vcjob.spec.tasks[0].template.spec;
  assert.deepEqual(pod.nodeSelector, { 'ucompute.dev/machine': 'standard' });
  assert.deepEqual(pod.imagePullSecrets, [{ name: 'registry' }]);
  assert.equal(pod.tolerations[0].key, 'dedicated');
  assert.ok(
    cluster.api.calls.every((c) =>
      c.resource === 'namespaces' || c.resource === 'queues' ? c.verb !== 'create' : true,
    ),
  );
  // Watches and lists stay in the one namespace, but for the nodes' sizes (cluster-scoped, read-only).
  assert.ok(
    cluster.api.calls
      .filter((c) => (c.verb === 'watch' || c.verb === 'list') && c.resource !== 'nodes')
      .every((c) => c.namespace === 'ucompute-jobs'),
  );
});

test('failure kinds: OOM kill, eviction, lost node and a deleted pod are FAILURE; a non-zero exit is SUCCESS', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  const scenarios: [string, (id: string) => void, string, RegExp][] = [
    [
      'oom',
      (id) => {
        cluster.volcano.exit(id, 0, 137, 'OOMKilled');
        cluster.volcano.phase(id, 'Terminated');
      },
      'FAILURE',
      /rank 0 ran out of memory \(OOMKilled\)/,
    ],
    [
      'evicted',
      (id) => {
        cluster.volcano.evict(id, 0);
        cluster.volcano.phase(id, 'Terminated');
      },
      'FAILURE',
      /rank 0 was evicted \(The node was low on resource: memory.\)/,
    ],
    [
      'lost',
      (id) => {
        cluster.volcano.loseNode(id, 0);
        cluster.volcano.phase(id, 'Aborted');
      },
      'FAILURE',
      /rank 0 was lost with its node/,
    ],
    // Volcano reacts to the deletion a moment later (its own watch), as here. The pod's deletion
    // and the job's abort come on two watches, in either order: both say it is a failure.
    [
      'deleted',
      (id) => {
        cluster.volcano.deletePod(id, 0);
        setTimeout(() => cluster.volcano.phase(id, 'Aborted'), 50);
      },
      'FAILURE',
      /rank 0's pod was deleted while the job ran|Volcano aborted the job/,
    ],
    [
      'exit3',
      (id) => {
        cluster.volcano.exit(id, 0, 3);
        cluster.volcano.phase(id, 'Failed');
      },
      'SUCCESS',
      /non-zero exit codes \(rank 0: 3\)/,
    ],
    [
      'aborted',
      (id) => cluster.volcano.phase(id, 'Aborted', 'CommandIssued'),
      'FAILURE',
      /Volcano aborted the job \(CommandIssued\)/,
    ],
  ];
  for (const [id, act] of scenarios) {
    await backend.submit(id, await build(ONE, { id, config: cluster.config() }));
    await event((e) => e.jobId === id && e.state === 'IN_QUEUE');
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await event((e) => e.jobId === id && e.state === 'RUNNING');
    act(id);
  }
  for (const [id, , state, status] of scenarios) {
    const end = await event((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
    assert.equal(end.state, state, id);
    assert.match(end.status, status, id);
  }
  await eventually(() => leftovers(cluster.api).length === 0);
});

test('cancel in every phase deletes the job with a grace period and Background propagation, then its companions; a repeat is harmless', async (t) => {
  const cluster = await fakeCluster(t);
  const following = backendOn(t, cluster, { kubernetes: { deleteGracePeriodSeconds: 2 } });
  const { backend, events, event } = following;
  const phases: [string, (id: string) => void][] = [
    ['queued', () => {}],
    ['admitted', (id) => cluster.volcano.admit(id)],
    [
      'running',
      (id) => {
        cluster.volcano.admit(id);
        cluster.volcano.run(id);
      },
    ],
    [
      'ending',
      (id) => {
        cluster.volcano.admit(id);
        cluster.volcano.run(id);
        cluster.volcano.phase(id, 'Terminating');
      },
    ],
  ];
  for (const [id, reach] of phases) {
    await backend.submit(id, await build(MPI, { id, config: cluster.config() }));
    await event((e) => e.jobId === id);
    reach(id);
    await eventually(() => cluster.api.get('jobs', 'ucompute-u-alice', `j-${id}`)?.status !== undefined);
    const before = events.length;
    await backend.cancel(id);
    assert.equal(cluster.api.get('jobs', 'ucompute-u-alice', `j-${id}`), undefined, id);
    assert.equal(cluster.api.get('networkpolicies', 'ucompute-u-alice', `policy-${id}`), undefined, id);
    await backend.cancel(id);
    await runningAfter(cluster, following, `${id}-later`);
    assert.deepEqual(
      events.slice(before).filter((e) => e.jobId === id),
      [],
      `${id}: a cancelled job reports nothing more`,
    );
    await backend.cancel(`${id}-later`);
  }
  const cancelled = new Set(phases.map(([id]) => `j-${id}`));
  const jobDeletes = cluster.api.calls.filter(
    (c) => c.verb === 'delete' && c.resource === 'jobs' && cancelled.has(c.name ?? ''),
  );
  assert.equal(jobDeletes.length, phases.length);
  for (const d of jobDeletes) {
    assert.equal(d.grace, 2);
    assert.equal(d.propagation, 'Background');
  }
  assert.deepEqual(leftovers(cluster.api), []);
  // Cancelling a job that never existed is fine.
  await backend.cancel('never');
});

test('extend changes nothing on the cluster: ucompute enforces deadlines itself', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  await backend.submit('x1', await build(ONE, { id: 'x1', config: cluster.config() }));
  const calls = cluster.api.calls.length;
  await backend.extend('x1', Date.now() + 3_600_000);
  assert.equal(cluster.api.calls.length, calls);
});

test('an expired watch lists again: changes made meanwhile, deletions included, are seen', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('w1', await build(ONE, { id: 'w1', config: cluster.config() }));
  await backend.submit('w2', await build(ONE, { id: 'w2', config: cluster.config() }));
  await event((e) => e.jobId === 'w2' && e.state === 'IN_QUEUE');
  const lists = () => cluster.api.calls.filter((c) => c.verb === 'list' && c.resource === 'jobs').length;
  const listed = lists();
  cluster.api.expireWatches();
  cluster.volcano.admit('w1');
  cluster.volcano.run('w1');
  cluster.api.remove('jobs', 'ucompute-u-alice', 'j-w2');
  assert.match((await event((e) => e.jobId === 'w1' && e.state === 'RUNNING')).status, /running/);
  const lost = await event((e) => e.jobId === 'w2' && e.state === 'FAILURE');
  assert.match(lost.status, /lost track of this job/);
  assert.ok(lists() > listed, 'the jobs were listed again');
  await eventually(() => cluster.api.openWatches() === 4); // jobs, pods, PodGroups and nodes
});

test('concurrent first submissions into a new namespace create its namespace, queue and isolation policy once', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  const ids = ['c1', 'c2', 'c3', 'c4', 'c5'];
  const builds = await Promise.all(ids.map((id) => build(ONE, { id, config: cluster.config() })));
  await Promise.all(ids.map((id, i) => backend.submit(id, builds[i]!)));
  const creates = cluster.api.calls.filter((c) => c.verb === 'create').map((c) => c.resource);
  assert.deepEqual(
    creates.filter((r) => r !== 'jobs'),
    ['namespaces', 'queues', 'networkpolicies'],
  );
  assert.equal(creates.filter((r) => r === 'jobs').length, ids.length);
});

test('a one-replica job with nothing to open is one create: its Volcano Job, isolated by the namespace policy', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  await backend.submit('first', await build(ONE, { id: 'first', config: cluster.config() }));
  const creates = () => cluster.api.calls.filter((c) => c.verb === 'create').map((c) => c.resource);
  assert.deepEqual(creates(), ['namespaces', 'queues', 'networkpolicies', 'jobs']);
  await backend.submit('second', await build(ONE, { id: 'second', config: cluster.config() }));
  assert.deepEqual(creates().slice(4), ['jobs']);
  const isolation = cluster.api.get('networkpolicies', 'ucompute-u-alice', JOB_ISOLATION_POLICY);
  const podLabels = cluster.api.get('jobs', 'ucompute-u-alice', 'j-second').spec.tasks[0].template.metadata
    .labels;
  for (const [key, value] of Object.entries(isolation.spec.podSelector.matchLabels))
    assert.equal(podLabels[key], value, key);
  assert.deepEqual(isolation.spec.policyTypes, ['Ingress', 'Egress']);
  assert.deepEqual(cluster.api.invalid, []);
});

test('a crash between the companions and the job: the resubmission finds what exists and creates the rest', async (t) => {
  const cluster = await fakeCluster(t);
  const b = await build(ONE, { id: 'c1', config: cluster.config() });
  // What the crashed process created: the namespace, the queue and the policy.
  for (const companion of b.companions) {
    const plurals: Record<string, string> = {
      Namespace: 'namespaces',
      Queue: 'queues',
      NetworkPolicy: 'networkpolicies',
    };
    const plural = plurals[companion.kind]!;
    cluster.api.apply(plural, structuredClone(companion));
  }
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('c1', b);
  assert.ok(cluster.api.get('jobs', 'ucompute-u-alice', 'j-c1'));
  assert.ok(cluster.api.get('networkpolicies', 'ucompute-u-alice', JOB_ISOLATION_POLICY));
  await event((e) => e.jobId === 'c1' && e.state === 'IN_QUEUE');
});

test('after a restart: jobs still there are known, a job that ended meanwhile reports its end, orphans are deleted', async (t) => {
  const cluster = await fakeCluster(t);
  const first = backendOn(t, cluster);
  // r1 has replicas, so a policy of its own.
  for (const [id, spec] of [
    ['r1', MPI],
    ['r2', ONE],
  ] as const)
    await first.backend.submit(id, await build(spec, { id, config: cluster.config() }));
  await first.event((e) => e.jobId === 'r2');
  await first.backend.close();
  // While ucompute was down: r2 ran to its end; a submission left an orphan policy long ago.
  cluster.volcano.admit('r2');
  cluster.volcano.run('r2');
  cluster.volcano.finish('r2', [0]);
  cluster.api.apply('networkpolicies', {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: 'policy-gone',
      namespace: 'ucompute-u-alice',
      labels: { 'ucompute.dev/job-id': 'gone', 'app.kubernetes.io/managed-by': 'ucompute' },
      creationTimestamp: new Date(Date.now() - 3_600_000).toISOString(),
    },
    spec: { podSelector: {}, policyTypes: ['Ingress'] },
  });
  const second = backendOn(t, cluster);
  const known = await second.backend.knownJobs();
  assert.deepEqual([...known].sort(), ['r1', 'r2']);
  assert.equal((await second.event((e) => e.jobId === 'r2' && e.state === 'SUCCESS')).exitCodes?.['0'], 0);
  assert.equal(await second.backend.reconcile(), 1);
  assert.equal(cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-gone'), undefined);
  assert.ok(
    cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-r1'),
    'a live job keeps its policy',
  );
});

test('reconciliation keeps the objects of a job submitted here that its watch has not shown yet, however old', async (t) => {
  const cluster = await fakeCluster(t);
  // The jobs' watch never delivers (as a watch lagging by minutes on a loaded API server).
  cluster.api.fail({ verb: 'watch', resource: 'jobs', status: 0, times: 1 });
  const { backend } = backendOn(t, cluster);
  await backend.submit('unseen', await build(MPI, { id: 'unseen', config: cluster.config() }));
  const policy = cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-unseen');
  const old = new Date(Date.now() - 3_600_000).toISOString();
  cluster.api.apply('networkpolicies', {
    ...policy,
    metadata: { ...policy.metadata, creationTimestamp: old },
  });
  assert.equal(await backend.reconcile(), 0);
  assert.ok(cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-unseen'));
});

test('API errors (403, 500) refuse the submission with a clear message and leave nothing behind; 409 means it exists', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  await backend.knownJobs();
  const cases: [string, Parameters<typeof cluster.api.fail>[0], RegExp][] = [
    [
      'e403',
      { verb: 'create', resource: 'networkpolicies', status: 403, times: 1 },
      /could not create NetworkPolicy ucompute-u-alice\/job-isolation: 403 injected 403/,
    ],
    [
      'e500',
      { verb: 'create', resource: 'jobs', status: 500, times: 1 },
      /could not create Job ucompute-u-alice\/j-e500: 500 injected 500/,
    ],
  ];
  for (const [id, fault, message] of cases) {
    cluster.api.fail(fault);
    await assert.rejects(backend.submit(id, await build(ONE, { id, config: cluster.config() })), message);
    assert.deepEqual(leftovers(cluster.api), [], id);
  }
  // A 409 on the job: it is there already (from an earlier attempt whose answer was lost).
  cluster.api.fail({ verb: 'create', resource: 'jobs', status: 409, times: 1 });
  await backend.submit('e409', await build(ONE, { id: 'e409', config: cluster.config() }));
  assert.deepEqual(cluster.api.invalid, []);
});

test('a request the API server never answers refuses the submission after the request timeout, and leaves nothing behind', async (t) => {
  const cluster = await fakeCluster(t);
  // Every request is bounded by this timeout, the answered ones too: it is short to keep the test
  // quick, and far above what an answered request takes even on a loaded machine, so only the
  // request the fake never answers runs into it.
  const { backend } = backendOn(t, cluster, { kubernetes: { requestTimeoutMs: 3000 } });
  await backend.knownJobs();
  cluster.api.fail({ verb: 'create', resource: 'jobs', status: 0, times: 1 });
  await assert.rejects(
    backend.submit('etimeout', await build(ONE, { id: 'etimeout', config: cluster.config() })),
    /could not create Job .*j-etimeout: the API server did not answer in time/,
  );
  assert.deepEqual(leftovers(cluster.api), []);
});

test('ConnectToJob: the peer gets host aliases to rank 0 and both policies open both ways', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('peera', await build(ONE, { id: 'peera', config: cluster.config() }));
  cluster.volcano.admit('peera');
  cluster.volcano.run('peera');
  await event((e) => e.jobId === 'peera' && e.state === 'RUNNING');
  const withPeer = {
    application: { name: 'http-check', version: '1.0' },
    product: { id: 'u1-standard-2', category: 'u1-standard' },
    replicas: 1,
    parameters: { server: { type: 'peer', hostname: 'server', jobId: 'peera' } },
  };
  const peers = new Map([['peera', { namespace: 'ucompute-u-alice' }]]);
  await backend.submit('peerb', await build(withPeer, { id: 'peerb', config: cluster.config(), peers }));
  assert.deepEqual(cluster.api.invalid, []);
  // Rules arrive as sent (client-node's typed models would have dropped each rule's `from`).
  const sent = cluster.api.received.find((o) => o.metadata.name === 'policy-peerb');
  assert.deepEqual(sent.spec.ingress[0].from, [
    { podSelector: { matchLabels: { 'volcano.sh/job-name': 'j-peera' } } },
  ]);
  const b = cluster.api.get('jobs', 'ucompute-u-alice', 'j-peerb');
  assert.deepEqual(b.spec.tasks[0].template.spec.hostAliases, [{ ip: '10.0.0.10', hostnames: ['server'] }]);
  const a = cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-peera');
  const fromB = { podSelector: { matchLabels: { 'volcano.sh/job-name': 'j-peerb' } } };
  assert.ok(
    a.spec.ingress.some((r: { from?: unknown[] }) => JSON.stringify(r.from) === JSON.stringify([fromB])),
  );
  assert.ok(a.spec.egress.some((r: { to?: unknown[] }) => JSON.stringify(r.to) === JSON.stringify([fromB])));
  // A repeated submit does not add the rules twice.
  const rules = a.spec.ingress.length;
  await backend.submit('peerb', await build(withPeer, { id: 'peerb', config: cluster.config(), peers }));
  assert.equal(
    cluster.api.get('networkpolicies', 'ucompute-u-alice', 'policy-peera').spec.ingress.length,
    rules,
  );
});

test('bad connection settings name the field', () => {
  assert.throws(
    () =>
      kubernetesBackend({
        config: resolvePipelineConfig(),
        settings: { kubeconfig: '/nonexistent/kubeconfig' },
      }),
    /kubernetes.kubeconfig: no file at \/nonexistent\/kubeconfig/,
  );
});

test('a configured context is used; an unknown one names the field', async (t) => {
  const cluster = await fakeCluster(t);
  const backend = kubernetesBackend({
    config: resolvePipelineConfig(cluster.config()),
    settings: { kubeconfig: cluster.kubeconfig, context: 'other' },
  });
  t.after(() => backend.close());
  assert.match(backend.description, /context other/);
  assert.throws(
    () =>
      kubernetesBackend({
        config: resolvePipelineConfig(cluster.config()),
        settings: { kubeconfig: cluster.kubeconfig, context: 'nope' },
      }),
    /kubernetes.context: no context "nope" in the kubeconfig \(it has: fake, other\)/,
  );
});

test('suspend deletes the running job without reporting an end; a submit of the same build runs the same job again', async (t) => {
  const cluster = await fakeCluster(t);
  const following = backendOn(t, cluster);
  const { backend, events, event } = following;
  const b = await build(ONE, { id: 'sus1', config: cluster.config() });
  await backend.submit('sus1', b);
  cluster.volcano.admit('sus1');
  cluster.volcano.run('sus1');
  await event((e) => e.jobId === 'sus1' && e.state === 'RUNNING');
  const before = events.length;
  await backend.suspend('sus1');
  assert.deepEqual(leftovers(cluster.api), [], 'its objects are gone: its resources are free');
  assert.equal((await backend.knownJobs()).has('sus1'), false);
  await runningAfter(cluster, following, 'later');
  assert.deepEqual(
    events.slice(before).filter((e) => e.jobId === 'sus1'),
    [],
    'a suspended job is not lost, and has not ended',
  );
  await backend.submit('sus1', b);
  assert.ok(cluster.api.get('jobs', 'ucompute-u-alice', 'j-sus1'), 'the same Volcano Job again');
  cluster.volcano.admit('sus1');
  cluster.volcano.run('sus1');
  await eventually(() => events.slice(before).some((e) => e.jobId === 'sus1' && e.state === 'RUNNING'));
  // Suspending a job the cluster does not have is fine.
  await backend.suspend('never');
});

test('the total sums the allocatable cores and memory of the nodes, from the one node watch', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  for (const [name, cpu, memory] of [
    ['n1', '4', '16Gi'],
    ['n2', '3500m', '8388608Ki'],
  ] as const) {
    cluster.api.apply('nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name },
      status: { allocatable: { cpu, memory } },
    });
  }
  assert.deepEqual(backend.machines().total, { cpu: 0, memory: 0 }, 'unknown before following');
  await backend.knownJobs(); // starts following
  const total = { cpu: 7.5, memory: 24 * 2 ** 30 };
  await eventually(() => JSON.stringify(backend.machines().total) === JSON.stringify(total));
  assert.equal(cluster.api.calls.filter((c) => c.resource === 'nodes' && c.verb === 'list').length, 1);
});

test('the largest machine is the largest allocatable of the schedulable nodes, followed as nodes come and go', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend } = backendOn(t, cluster);
  const node = (name: string, cpu: string, memory: string, unschedulable = false) => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name },
    spec: { unschedulable },
    status: { allocatable: { cpu, memory } },
  });
  await backend.knownJobs(); // starts following
  assert.equal(backend.machines().largest, null, 'unknown before any node is seen');
  cluster.api.apply('nodes', node('small', '1900m', '7Gi'));
  cluster.api.apply('nodes', node('wide', '16', '4Gi'));
  cluster.api.apply('nodes', node('cordoned', '64', '256Gi', true));
  const GiB = 2 ** 30;
  const expected = { cpuMillis: 16_000, memoryBytes: 7 * GiB, holdsEveryReplica: false };
  await eventually(() => JSON.stringify(backend.machines().largest) === JSON.stringify(expected));
  // The cordoned node counts in the total, not as a machine a job may be given.
  assert.deepEqual(backend.machines().total, { cpu: 81.9, memory: 267 * GiB });
  // Made again only when a node changed, not at each call (intake asks at every submission).
  assert.equal(backend.machines(), backend.machines());
  cluster.api.remove('nodes', undefined, 'wide');
  await eventually(() => backend.machines().largest?.cpuMillis === 1900);
});
