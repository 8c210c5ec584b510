import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { sshKeys } from '../src/jobs/ssh-keys.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import type { Store } from '../src/store/store.ts';
import { eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { catalog, products } from './support/fixtures.ts';
import { openTestBackend, openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** Jobs with sshEnabled: the owner's keys log in to rank 0 through the endpoint the backend opens. */

const run = promisify(execFile);
const alice = { username: 'alice', admin: false };
const sshServer = {
  application: { name: 'ssh-server', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};
const CONNECTED = /^SSH: Connected! Available at: ssh ucloud@(\S+) -p (\d+)$/;

/** The endpoint the job's updates announce, once they do. */
function announced(store: Store, id: string, timeout = 30_000): Promise<{ host: string; port: number }> {
  return until(
    async () => {
      const updates = await store.jobs.updatesOf(id);
      const line = updates.map((u) => CONNECTED.exec(u.status ?? '')).find(Boolean);
      if (line) return { host: line[1]!, port: Number(line[2]) };
      throw new Error(`not yet; its updates: ${JSON.stringify(updates, null, 1)}`);
    },
    { describe: 'the ssh endpoint is announced', timeout },
  );
}

const tools = await needs('bwrap', 'nft', 'ip', 'sshd', 'ssh', 'ssh-keygen');

test(
  'local backend: the owner logs in with a registered key; a key of another user is refused',
  tools,
  async (t) => {
    // A port range of this test's own, so that tests beside it do not take its ports.
    const first = 20000 + (process.pid % 2000) * 10;
    const {
      home: dir,
      backend,
      store,
      service,
    } = await openTestService(t, {
      config: { ssh: { firstPort: first, lastPort: first + 9 } },
      requireCredits: false,
    });
    for (const user of ['alice', 'bob']) {
      await store.users.createUser(user, false);
      await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', user, '-f', join(dir, user)]);
    }
    const keys = sshKeys(store);
    keys.create(alice, [{ title: 'laptop', key: await readFile(join(dir, 'alice.pub'), 'utf8') }]);
    keys.create({ username: 'bob', admin: false }, [
      { title: 'bob', key: await readFile(join(dir, 'bob.pub'), 'utf8') },
    ]);
    // MANDATORY in the app: enabled although the request leaves sshEnabled out.
    const [id] = await service.create(alice, [sshServer]);
    const { host, port } = await announced(store, id!);
    assert.equal(host, '127.0.0.1');
    assert.ok(port >= first && port <= first + 9, String(port));

    const ssh = (key: string) =>
      run(
        'ssh',
        [
          ...['-p', String(port), '-i', join(dir, key), '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes'],
          ...[
            '-o',
            'StrictHostKeyChecking=no',
            '-o',
            'UserKnownHostsFile=/dev/null',
            '-o',
            'ConnectTimeout=10',
          ],
          'ucloud@127.0.0.1',
          'echo $((6*7))',
        ],
        { timeout: 30_000 },
      );
    // sshd may still be starting when the job is said to run.
    const answer = await until(() => ssh('alice'), {
      describe: 'sshd in the job answers',
      timeout: 20_000,
      every: 500,
    }).catch(async (e: Error) => {
      let output = '';
      for await (const c of backend.logs(id!, { follow: false }))
        output += `${c.stdout ?? ''}${c.stderr ?? ''}`;
      assert.fail(`${e.message}\n${JSON.stringify(await store.jobs.updatesOf(id!), null, 1)}\n${output}`);
    });
    assert.equal(answer.stdout.trim(), '42');
    await assert.rejects(ssh('bob'), /Permission denied/);

    // The port is released when the job ends.
    await service.terminate(alice, [id!]);
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    assert.ok(refused, 'nothing listens on the port of an ended job');
  },
);

test(
  'local backend: a running job keeps its SSH port across a restart of ucompute; the port goes with the job',
  tools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-ssh-restart-'));
    const first = 21000 + (process.pid % 2000) * 10;
    const config = { ssh: { firstPort: first, lastPort: first + 9 } };
    // Port 22 of rank 0 says hello to every connection.
    const server =
      'import socket\ns = socket.create_server(("", 22))\nwhile True:\n    c, _ = s.accept()\n    c.sendall(b"hello\\n")\n    c.close()';
    const job = vcjob('greeter', [shellTask('t', 1, `exec python3 -c '${server}'`)]);
    const hello = async (port: number) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      for await (const chunk of socket) text += chunk;
      return text;
    };
    const before = await openTestBackend(t, { dir, config });
    await before.backend.submitVolcanoJob('greeter', job);
    await before.running('greeter');
    const { port } = await before.backend.sshEndpoint('greeter');
    // The server may still be starting.
    const answer = await until(() => hello(port), {
      describe: 'the job answers on its ssh port',
      every: 100,
    });
    assert.equal(answer, 'hello\n');
    await before.close();

    const after = await openTestBackend(t, { dir, config });
    // After the backends' own clean-up (hooks run in order): the runtime unmounts its tmpfs at close.
    t.after(() => rm(dir, { recursive: true, force: true }));
    assert.equal(await hello(port), 'hello\n', 'bound again at start, before anyone asks');
    assert.deepEqual(await after.backend.sshEndpoint('greeter'), { host: '127.0.0.1', port });
    await after.backend.cancel('greeter');
    await after.ended('greeter');
    await assert.rejects(hello(port), /ECONNREFUSED/);
  },
);

test('kubernetes: the keys from a Secret into /etc/ucloud/ssh by an init container, a NodePort Service to rank 0, port 22 open, all removed at the end', async (t) => {
  const cluster = await fakeCluster(t);
  const config = resolvePipelineConfig(cluster.config());
  const backend = kubernetesBackend({
    config,
    settings: { kubeconfig: cluster.kubeconfig, sshHost: 'ssh.example.org' },
  });
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice';
  sshKeys(store).create(alice, [{ title: 'laptop', key }]);
  const service = createJobService({
    store,
    env: { catalog, products, config },
    backend,
    requireCredits: false,
  });
  t.after(async () => {
    await service.stop();
    await backend.close();
  });
  await service.start();
  const [id] = await service.create(alice, [{ ...sshServer, sshEnabled: true }]);
  await eventually(() => cluster.volcano.job(id!) !== undefined);
  const job = cluster.volcano.job(id!)!;
  const namespace = job.metadata.namespace;
  const secret = cluster.api.get('secrets', namespace, `j-${id}-ssh-keys`);
  assert.deepEqual(secret.stringData, { 'authorized_keys.ucloud': `${key}\n` });
  const pod = job.spec.tasks[0].template.spec;
  assert.deepEqual(
    pod.volumes.find((v: { name: string }) => v.name === 'ssh-keys'),
    { name: 'ssh-keys', secret: { secretName: `j-${id}-ssh-keys`, defaultMode: 0o444 } },
  );
  // An init container copies them into /etc/ucloud/ssh (0700, 0600) as the job's user.
  const init = pod.initContainers.find((c: { name: string }) => c.name === 'ssh-keys');
  assert.match(
    init.command[2],
    /chmod 700 \/etc\/ucloud\/ssh\nchmod 600 \/etc\/ucloud\/ssh\/authorized_keys.ucloud$/,
  );
  assert.equal(init.securityContext.runAsUser, config.jobUid);
  const service22 = cluster.api.get('services', namespace, `j-${id}-ssh`);
  assert.equal(service22.spec.type, 'NodePort');
  assert.deepEqual(service22.spec.selector, {
    'volcano.sh/job-name': `j-${id}`,
    'volcano.sh/task-index': '0',
  });
  const policy = cluster.api.get('networkpolicies', namespace, `policy-${id}`);
  assert.deepEqual(policy.spec.ingress.at(-1), { ports: [{ protocol: 'TCP', port: 22 }] });

  cluster.volcano.admit(id!);
  cluster.volcano.run(id!);
  const { host, port } = await announced(store, id!, 5000);
  assert.deepEqual({ host, port }, { host: 'ssh.example.org', port: service22.spec.ports[0].nodePort });
  await service.terminate(alice, [id!]);
  assert.equal(cluster.api.get('services', namespace, `j-${id}-ssh`), undefined);
  assert.equal(cluster.api.get('secrets', namespace, `j-${id}-ssh-keys`), undefined);
  assert.deepEqual(cluster.api.invalid, []);
});
