/**
 * Jobs through `ucompute serve --backend kubernetes` on a real kube-apiserver with Volcano's
 * scheduler, controllers and admission webhooks, on KWOK's nodes (scripts/cluster.sh).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import {
  kubectl,
  kubectlJson,
  objectsOf,
  ownerNamespace,
  simulated,
  skip,
  spec,
  startUcompute,
} from './cluster.ts';

test('a job runs to its end with exit code 0; its Volcano Job, pods and companions are then gone', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  // Long enough to be seen running on a loaded machine: a 2 s job's Volcano Job can go from
  // Pending to Completed in one sync of Volcano's controller, never Running.
  const id = await ucompute.submit(spec('sim-batch', simulated(0, '15s'), { replicas: 2 }));
  const running = await ucompute.untilState(id, 'RUNNING');
  assert.match(running.status.status ?? running.updates.at(-1).status, /running/);
  const done = await ucompute.untilState(id, 'SUCCESS');
  assert.deepEqual(done.status.exitCode, { '0': 0, '1': 0 });
  await until(async () => (await objectsOf(id)).length === 0, {
    describe: 'the job objects deleted',
    timeout: 180_000,
    every: 200,
  });
});

test('a non-zero exit is a SUCCESS with its exit code; an OOM kill is a FAILURE', { skip }, async (t) => {
  const ucompute = await startUcompute(t);
  const exited = await ucompute.submit(spec('sim-batch', simulated(3)));
  const oom = await ucompute.submit(spec('sim-batch', simulated(137, '2s', 'OOMKilled')));
  const done = await ucompute.untilState(exited, 'SUCCESS');
  assert.deepEqual(done.status.exitCode, { '0': 3 });
  assert.match(JSON.stringify(done.updates), /non-zero exit codes \(rank 0: 3\)/);
  const failed = await ucompute.untilState(oom, 'FAILURE');
  assert.match(JSON.stringify(failed.updates), /ran out of memory \(OOMKilled\)/);
});

test('cancel deletes the Volcano Job, and the garbage collector its pods and companions', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const id = await ucompute.submit(spec('terminal'));
  await ucompute.untilState(id, 'RUNNING');
  assert.ok((await objectsOf(id)).some((o) => o.startsWith('Pod/')));
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id }] });
  await ucompute.untilState(id, 'SUCCESS');
  await until(async () => (await objectsOf(id)).length === 0, {
    describe: 'the job objects deleted',
    timeout: 180_000,
    every: 200,
  });
});

test('a job whose time runs out is EXPIRED and removed', { skip }, async (t) => {
  const ucompute = await startUcompute(t);
  const id = await ucompute.submit(
    spec('terminal', {}, { timeAllocation: { hours: 0, minutes: 0, seconds: 3 } }),
  );
  await ucompute.untilState(id, 'EXPIRED');
  await until(async () => (await objectsOf(id)).length === 0, {
    describe: 'the job objects deleted',
    timeout: 180_000,
    every: 200,
  });
});

test('a gang that fits only partly waits IN_QUEUE with Volcano own reason, and runs when capacity frees', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const nodes = (await kubectlJson(['get', 'nodes'])).items.length as number;
  // One whole node for each replica of the blocker but one; then a gang of two whole nodes.
  const whole = { product: { id: 'u1-standard-8', category: 'u1-standard' } };
  const blocker = await ucompute.submit(spec('terminal', {}, { ...whole, replicas: nodes - 1 }));
  await ucompute.untilState(blocker, 'RUNNING');
  const gang = await ucompute.submit(spec('sim-batch', simulated(0, '1s'), { ...whole, replicas: 2 }));
  let waiting: { updates: { status?: string }[] } | undefined;
  await until(
    async () => {
      waiting = await ucompute.job(gang);
      return waiting!.updates.some((u) => /unschedulable|Insufficient|not enough/i.test(u.status ?? ''));
    },
    { describe: 'the gang waits with the scheduler reason', timeout: 180_000, every: 200 },
  );
  assert.equal((await ucompute.job(gang)).status.state, 'IN_QUEUE', JSON.stringify(waiting?.updates));
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id: blocker }] });
  await ucompute.untilState(gang, 'SUCCESS');
});

test('ucompute restarted mid-job finds its running job again, and the end of one that ended meanwhile', {
  skip,
}, async (t) => {
  const first = await startUcompute(t);
  const long = await first.submit(spec('terminal'));
  const short = await first.submit(spec('sim-batch', simulated(0, '4s')));
  await first.untilState(long, 'RUNNING');
  await first.untilState(short, 'RUNNING');
  await first.stop();
  await until(
    async () => {
      const jobs = await kubectlJson([
        'get',
        'jobs.batch.volcano.sh',
        '-A',
        '-l',
        `ucompute.dev/job-id=${short}`,
      ]);
      return jobs.items[0]?.status?.state?.phase === 'Completed';
    },
    {
      describe: 'the short job completed on the cluster while ucompute was down',
      timeout: 180_000,
      every: 200,
    },
  );
  const second = await startUcompute(t, { dataDir: first.served.dataDir });
  await second.untilState(short, 'SUCCESS');
  assert.equal((await second.job(long)).status.state, 'RUNNING');
  await second.client.api('/api/jobs/terminate', { items: [{ id: long }] });
  await second.untilState(long, 'SUCCESS');
});

test("an action outside the chart's role is refused to ucompute: RBAC is enough and no more", {
  skip,
}, async () => {
  // Reading one Secret (its own token), granting itself more, touching nodes: none is ucompute's.
  await assert.rejects(
    kubectl(['get', 'secret', 'ucompute-token', '-n', 'ucompute'], { asUcompute: true }),
    /forbidden/i,
  );
  await assert.rejects(
    kubectl(
      [
        'create',
        'clusterrolebinding',
        'more',
        '--clusterrole=cluster-admin',
        '--serviceaccount=ucompute:ucompute',
        '--dry-run=server',
      ],
      { asUcompute: true },
    ),
    /forbidden/i,
  );
  await assert.rejects(
    kubectl(['delete', 'node', 'kwok-node-0', '--dry-run=server'], { asUcompute: true }),
    /forbidden/i,
  );
  assert.match(
    await kubectl(['auth', 'can-i', 'create', 'jobs.batch.volcano.sh', '-n', 'ucompute'], {
      asUcompute: true,
    }),
    /yes/,
  );
});

test("per owner: a new owner's queue is created with its weight, and its first job waits until Volcano opens it", {
  skip,
}, async (t) => {
  // An owner no other test of the suite uses: its queue is new here, whatever ran before.
  const ucompute = await startUcompute(t, {
    perOwner: true,
    config: "fairShare: { weights: { 'user:dana': 3 } }",
  });
  await ownerNamespace('ucompute-u-dana');
  const dana = await ucompute.user('dana');
  const [id] = (
    await dana.api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [spec('sim-batch', simulated(0, '1s'))],
    })
  ).responses.map((r) => r.id);
  let state = '';
  await until(
    async () => {
      state = (await dana.api<{ status: { state: string } }>(`/api/jobs/retrieve?id=${id}`)).status.state;
      return state === 'SUCCESS' || state === 'FAILURE';
    },
    { describe: `dana's job ${id} ended`, timeout: 120_000, every: 200 },
  );
  assert.equal(state, 'SUCCESS');
  const queue = await kubectlJson(['get', 'queue', 'ucompute-u-dana']);
  assert.equal(queue.spec.weight, 3);
  assert.equal(queue.status.state, 'Open');
});
