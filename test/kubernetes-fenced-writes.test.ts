/**
 * A leader's creates, and the removals only a leader decides, are asked again whether it still
 * leads as they go out, not only when it decided them: a request that waited (the rate limiter, a
 * connection, a `kill -STOP`) while another replica took over is not sent. The failover test's
 * "created twice" was such a create: sent by the resumed old leader after the new one had created,
 * run and removed the job. A cancel asked of any replica's API still goes.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { type Connection, connect } from '../src/backends/kubernetes/connection.ts';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { resolveKubernetesSettings } from '../src/backends/kubernetes/settings.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { fakeCluster } from './support/fake-kube/cluster.ts';
import { build } from './support/fixtures.ts';
import { until } from './support/until.ts';

const ONE = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 1,
  parameters: {},
};

/** A backend on the fake cluster that leads while `leads` says so, its connection and its log. */
async function leadingBackend(t: { after(cleanup: () => unknown): void }) {
  const cluster = await fakeCluster(t);
  const config = cluster.config();
  const connection = connect(resolveKubernetesSettings(config.kubernetes));
  const logged: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(chunk.toString('utf8'));
      done();
    },
  });
  const backend = kubernetesBackend({
    config: resolvePipelineConfig(config),
    settings: config.kubernetes,
    connection,
    log: pino(sink),
  });
  t.after(() => backend.close());
  const state = { leads: true };
  backend.setLeading?.(() => state.leads);
  const submit = async (id: string) => backend.submit(id, await build(ONE, { id, config }));
  const vcjob = (id: string) => cluster.api.get('jobs', 'ucompute-u-alice', `j-${id}`);
  return { cluster, connection, backend, state, submit, vcjob, logged };
}

/**
 * Holds the next requests in the rate limiter (as it does when the leader has many to send) until
 * `release`; `entered` resolves when the first has come.
 */
function holdRequests(connection: Connection) {
  let entered!: () => void;
  const waiting = new Promise<void>((resolve) => {
    entered = resolve;
  });
  let open!: () => void;
  const held = new Promise<void>((resolve) => {
    open = resolve;
  });
  const take = connection.limiter.take;
  connection.limiter.take = async () => {
    entered();
    await held;
  };
  return {
    entered: waiting,
    release() {
      connection.limiter.take = take;
      open();
    },
  };
}

test('a create decided while leading, held until another replica leads, is not sent', async (t) => {
  const { cluster, connection, state, submit, vcjob } = await leadingBackend(t);
  // The owner's namespace, queue and isolation policy exist after a first job: the next job is
  // one create, its Volcano Job.
  await submit('first');
  assert.ok(vcjob('first'));
  const hold = holdRequests(connection);
  const submitted = submit('held');
  await hold.entered;
  // Its create decided (the backend asked whether it leads before it), and waiting to go: the
  // lease passes to another replica meanwhile.
  state.leads = false;
  hold.release();
  await assert.rejects(
    submitted,
    /could not create Job ucompute-u-alice\/j-held: this replica no longer leads/,
  );
  assert.equal(vcjob('held'), undefined);
  const creates = cluster.api.calls.filter((c) => c.verb === 'create' && c.resource === 'jobs');
  assert.equal(creates.length, 1, 'only the first job was created');
});

test('the removal of an ended job, held until another replica leads, is not sent', async (t) => {
  const { cluster, connection, state, submit, vcjob, logged } = await leadingBackend(t);
  await submit('ended');
  // The job ends; its removal (a list, then the deletes) waits to go while the lease passes.
  const hold = holdRequests(connection);
  cluster.volcano.admit('ended');
  cluster.volcano.run('ended');
  cluster.volcano.finish('ended', [0]);
  await hold.entered;
  state.leads = false;
  hold.release();
  // The list goes (it changes nothing); the delete is refused: the new leader decides the removal.
  const deletes = () => cluster.api.calls.filter((c) => c.verb === 'delete');
  const refused = () => logged.find((line) => line.includes('could not remove the objects of an ended job'));
  await until(() => refused() !== undefined || deletes().length > 0, { describe: 'the removal tried' });
  assert.deepEqual(deletes(), []);
  assert.match(refused()!, /this replica no longer leads/);
  assert.ok(vcjob('ended'));
});

test('a replica that does not lead still reads and deletes: it cancels what its own API is asked to', async (t) => {
  const { backend, state, submit, vcjob } = await leadingBackend(t);
  await submit('job1');
  assert.ok(vcjob('job1'));
  state.leads = false;
  await backend.cancel('job1');
  assert.equal(vcjob('job1'), undefined);
});
