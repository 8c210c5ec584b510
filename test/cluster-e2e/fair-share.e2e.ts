/**
 * Two owners sharing the cluster by their Volcano Queues' weights (src/plugins/fair-share.ts), as
 * Volcano's proportion plugin divides it. Volcano here runs as its installer configures it: no
 * preempt or reclaim (a queue keeps what it holds), and overcommit lets only what fits in 1.2× the
 * idle capacity wait Inqueue. So the test fills the cluster from one owner first, lets the other
 * queue up, then frees one node at a time: each freed node goes to the queue with the lower share
 * (allocated / deserved, deserved = the cluster × weight / total weight while both ask for more),
 * whatever the order of submission — which no session timing can change.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { kubectlJson, ownerNamespace, simulated, skip, spec, startUcompute } from './cluster.ts';

const LOCAL = 'ucompute-u-local';
const BOB = 'ucompute-u-bob';

test("two owners who each ask for more than the cluster holds share its nodes by their queues' weights (3:1)", {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t, {
    perOwner: true,
    config: "fairShare: { weights: { 'user:local': 3, 'user:bob': 1 } }",
  });
  await ownerNamespace(LOCAL);
  await ownerNamespace(BOB);
  const admin = ucompute.client;
  const bob = await ucompute.user('bob');

  const nodes = (await kubectlJson(['get', 'nodes'])).items.length as number;
  assert.equal(nodes, 4, 'the shares below are those of the default 4 nodes');
  // A whole node each: CPU and memory in the nodes' proportion, so a queue's share is one figure.
  const jobs = Array.from({ length: nodes + 1 }, () =>
    spec('sim-batch', simulated(0, '1h'), { product: { id: 'u1-standard-8', category: 'u1-standard' } }),
  );
  const submit = async (client: typeof admin) =>
    (await client.api<{ responses: { id: string }[] }>('/api/jobs', { items: jobs })).responses.map(
      (r) => r.id,
    );
  /** The jobs whose pod runs (a pod being deleted no longer counts: its node is being freed). */
  const runningPods = async (namespace: string): Promise<string[]> =>
    (await kubectlJson(['get', 'pods', '-n', namespace, '--field-selector=status.phase=Running'])).items
      .filter((p: { metadata: { deletionTimestamp?: string } }) => !p.metadata.deletionTimestamp)
      .map((p: { metadata: { labels: Record<string, string> } }) => p.metadata.labels['ucompute.dev/job-id']);
  const groups = async (namespace: string) =>
    (await kubectlJson(['get', 'podgroups', '-n', namespace, '-l', 'ucompute.dev/job-id'])).items
      .length as number;
  let split = { local: [] as string[], bob: [] as string[] };
  /** Waits until every node runs a job (`freed`'s node taken again), and answers whose they are. */
  const untilFull = async (what: string, freed?: string) => {
    await until(
      async () => {
        split = { local: await runningPods(LOCAL), bob: await runningPods(BOB) };
        return split.local.length + split.bob.length === nodes && !split.local.includes(freed ?? '');
      },
      { describe: what, timeout: 300_000, every: 200 },
    );
    return { local: split.local.length, bob: split.bob.length };
  };

  const local = await submit(admin);
  let bobs: string[] = [];
  try {
    assert.deepEqual(await untilFull('the first owner filling the cluster'), { local: 4, bob: 0 });
    const fifth = local.find((id) => !split.local.includes(id))!;
    bobs = await submit(bob);
    await until(async () => (await groups(BOB)) === jobs.length, {
      describe: 'both owners waiting in their queues',
      timeout: 180_000,
      every: 200,
    });

    // One node freed: the second owner's queue has the lower share (0 against 3/3), and takes it
    // although the first owner's fifth job was submitted before any of the second owner's.
    const first = split.local[0]!;
    await admin.api('/api/jobs/terminate', { items: [{ id: first }] });
    assert.deepEqual(await untilFull('the freed node taken', first), { local: 3, bob: 1 });

    // Another freed: now the first owner's share is the lower (2/3 against 1/1): its fifth job
    // runs, and the second owner's four stay waiting.
    const second = split.local[0]!;
    await admin.api('/api/jobs/terminate', { items: [{ id: second }] });
    assert.deepEqual(await untilFull('the second freed node taken', second), { local: 3, bob: 1 });
    assert.ok(
      split.local.includes(fifth),
      `the first owner's waiting job ${fifth} runs: ${JSON.stringify(split)}`,
    );
  } finally {
    // Nothing of this test may hold the nodes for the next one.
    await admin.api('/api/jobs/terminate', { items: local.map((id) => ({ id })) });
    if (bobs.length > 0) await bob.api('/api/jobs/terminate', { items: bobs.map((id) => ({ id })) });
    await until(async () => (await groups(LOCAL)) + (await groups(BOB)) === 0, {
      describe: 'every job of both owners gone',
      timeout: 300_000,
      every: 200,
    });
  }
});
