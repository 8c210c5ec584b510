/**
 * Network isolation as the API server holds it: jobs of two owners (their own namespaces), one
 * with two replicas, one peered with another, and the policies they made judged by the documented
 * NetworkPolicy semantics (test/support/network-policies.ts; the harness has no network plugin to
 * enforce them). A job reaches only its own replicas and its peers, the session proxy reaches
 * every job, DNS and the public internet are open, private addresses are not, and every job pod
 * is isolated by a policy that existed before it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allowed, type Endpoint, type Policy, selecting, type World } from '../support/network-policies.ts';
import { until } from '../support/until.ts';
import { kubectlJson, ownerNamespace, simulated, skip, spec, startUcompute } from './cluster.ts';

const LOCAL = 'ucompute-u-local';
const BOB = 'ucompute-u-bob';

interface Pod {
  metadata: { name: string; namespace: string; labels: Record<string, string>; creationTimestamp: string };
  status: { phase: string };
}

test("a job reaches its own replicas and its peers, nothing else of its owner's or another's; the proxy reaches all", {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t, { perOwner: true });
  await ownerNamespace(LOCAL);
  await ownerNamespace(BOB);
  const bob = await ucompute.user('bob');
  const long = simulated(0, '1h');
  const submitted: { local: string[]; bob: string[] } = { local: [], bob: [] };
  const pods = async (): Promise<Pod[]> =>
    (await kubectlJson(['get', 'pods', '-A', '-l', 'ucompute.dev/job-id'])).items;
  try {
    const [a1, a2, multi] = [
      await ucompute.submit(spec('sim-batch', long)),
      await ucompute.submit(spec('sim-batch', long)),
      await ucompute.submit(spec('sim-batch', long, { replicas: 2 })),
    ];
    submitted.local.push(a1, a2, multi);
    const [b1] = (
      await bob.api<{ responses: { id: string }[] }>('/api/jobs', { items: [spec('sim-batch', long)] })
    ).responses.map((r) => r.id);
    submitted.bob.push(b1!);
    await ucompute.untilState(a1, 'RUNNING');
    const peer = await ucompute.submit(
      spec('sim-batch', long, { resources: [{ type: 'peer', hostname: 'first', jobId: a1 }] }),
    );
    submitted.local.push(peer);
    const running = await until(
      async () => {
        const all = await pods();
        return all.length === 6 && all.every((p) => p.status.phase === 'Running') && all;
      },
      { describe: "the six jobs' pods running", timeout: 120_000, every: 200 },
    );

    const namespaces = new Map<string, Record<string, string>>(
      (await kubectlJson(['get', 'namespaces'])).items.map(
        (n: { metadata: { name: string; labels: Record<string, string> } }) => [
          n.metadata.name,
          n.metadata.labels,
        ],
      ),
    );
    const policies: Policy[] = (await kubectlJson(['get', 'networkpolicies', '-A'])).items;
    const world: World = { policies, namespaces };
    const pod = (jobId: string, rank = 0): Endpoint => {
      const found = running.find(
        (p) => p.metadata.labels['ucompute.dev/job-id'] === jobId && p.metadata.name.endsWith(`-${rank}`),
      );
      assert.ok(found, `${jobId}'s rank ${rank}`);
      return { pod: found.metadata.name, namespace: found.metadata.namespace, labels: found.metadata.labels };
    };
    const tcp = { protocol: 'TCP', port: 8080 } as const;
    const reach = (from: Endpoint, to: Endpoint, port: { protocol: 'TCP' | 'UDP'; port: number } = tcp) =>
      allowed(world, from, to, port);
    const proxy: Endpoint = {
      pod: 'ucompute-0',
      namespace: 'ucompute',
      labels: { 'app.kubernetes.io/name': 'ucompute' },
    };
    const stranger: Endpoint = { pod: 'other-app', namespace: LOCAL, labels: { app: 'other' } };

    // Every job pod is isolated both ways, by a policy older than the pod.
    for (const p of running) {
      const self = { pod: p.metadata.name, namespace: p.metadata.namespace, labels: p.metadata.labels };
      for (const direction of ['Ingress', 'Egress'] as const) {
        const older = selecting(world, self, direction).filter(
          (policy) => (policy.metadata.creationTimestamp ?? '') <= p.metadata.creationTimestamp,
        );
        assert.notEqual(older.length, 0, `${p.metadata.name} isolated (${direction}) from its start`);
      }
    }
    // Between jobs: only replicas of one job and peers.
    assert.equal(reach(pod(multi, 0), pod(multi, 1)), true, 'replicas of one job');
    assert.equal(reach(pod(multi, 1), pod(multi, 0)), true, 'replicas of one job, back');
    assert.equal(reach(pod(peer), pod(a1)), true, 'to the peer');
    assert.equal(reach(pod(a1), pod(peer)), true, 'from the peer');
    for (const [from, to] of [
      [a1, a2],
      [a2, a1],
      [multi, a1],
      [a1, multi],
      [peer, a2],
      [a1, b1!],
      [b1!, a1],
      [b1!, peer],
    ]) {
      assert.equal(reach(pod(from!), pod(to!)), false, `${from} to ${to}`);
    }
    // The proxy in, nothing of anyone else's in or out; DNS and the internet out, private ranges not.
    for (const id of [a1, a2, multi, peer, b1!]) {
      assert.equal(reach(proxy, pod(id)), true, `the proxy to ${id}`);
      assert.equal(reach(pod(id), proxy), false, `${id} to the proxy`);
      assert.equal(reach(stranger, pod(id)), false, `another app's pod to ${id}`);
      assert.equal(reach(pod(id), stranger), false, `${id} to another app's pod`);
      assert.equal(reach(pod(id), { ip: '10.96.0.10' }, { protocol: 'UDP', port: 53 }), true, `${id}: DNS`);
      assert.equal(
        reach(pod(id), { ip: '1.1.1.1' }, { protocol: 'TCP', port: 443 }),
        true,
        `${id}: internet`,
      );
      assert.equal(reach(pod(id), { ip: '10.1.2.3' }, { protocol: 'TCP', port: 443 }), false, `${id}: 10/8`);
      assert.equal(
        reach(pod(id), { ip: '169.254.169.254' }, { protocol: 'TCP', port: 80 }),
        false,
        `${id}: metadata`,
      );
    }
  } finally {
    // Nothing of this test may hold the nodes for the next one.
    await ucompute.client.api('/api/jobs/terminate', { items: submitted.local.map((id) => ({ id })) });
    await bob.api('/api/jobs/terminate', { items: submitted.bob.map((id) => ({ id })) });
    await until(async () => (await pods()).length === 0, {
      describe: 'every pod of both owners gone',
      timeout: 300_000,
      every: 200,
    });
  }
});
