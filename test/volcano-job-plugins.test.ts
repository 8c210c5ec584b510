import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TaskSpec, VolcanoJob } from '../src/volcano/api/types.ts';
import { jobPlugins, planPods, preparePlugins } from '../src/volcano/emulation/plugins/index.ts';

const task = (name: string, replicas: number): TaskSpec => ({
  name,
  replicas,
  template: { spec: { containers: [{ name: 'c', image: 'i' }] } },
});

const job = (plugins: Record<string, string[]>, ...tasks: TaskSpec[]): VolcanoJob => ({
  apiVersion: 'batch.volcano.sh/v1alpha1',
  kind: 'Job',
  metadata: { name: 'lm' },
  spec: { plugins, tasks },
});

const KEYS = ['--ssh-private-key=PRIVATE', '--ssh-public-key=PUBLIC'];

test('mpi brings svc and ssh (admission); each pod gets env, svc and mpi variables in that order', async () => {
  const lm = job({ env: [], mpi: ['--master=head'], ssh: KEYS }, task('head', 1), task('worker', 2));
  assert.deepEqual(jobPlugins(lm), { env: [], mpi: ['--master=head'], ssh: KEYS, svc: [] });
  const state = await preparePlugins(lm);
  assert.deepEqual(state, { ssh: { privateKey: 'PRIVATE', publicKey: 'PUBLIC' } });
  const [head, worker] = planPods(lm, state);
  const hosts = 'lm-worker-0.lm,lm-worker-1.lm';
  assert.deepEqual(head!.env, [
    ['VK_TASK_INDEX', '0'],
    ['VC_TASK_INDEX', '0'],
    ['VC_HEAD_HOSTS', 'lm-head-0.lm'],
    ['VC_HEAD_NUM', '1'],
    ['VC_WORKER_HOSTS', hosts],
    ['VC_WORKER_NUM', '2'],
    ['MPI_HOST', hosts],
  ]);
  assert.equal(
    worker!.env.find(([name]) => name === 'MPI_HOST'),
    undefined,
    'only the master has MPI_HOST',
  );
  assert.deepEqual(
    head!.files.map((f) => `${f.path} ${f.mode.toString(8)}`),
    [
      '/etc/volcano/head.host 644',
      '/etc/volcano/VC_HEAD_HOSTS 644',
      '/etc/volcano/VC_HEAD_NUM 644',
      '/etc/volcano/worker.host 644',
      '/etc/volcano/VC_WORKER_HOSTS 644',
      '/etc/volcano/VC_WORKER_NUM 644',
      '/root/.ssh/id_rsa 600',
      '/root/.ssh/id_rsa.pub 600',
      '/root/.ssh/authorized_keys 600',
      '/root/.ssh/config 600',
    ],
  );
  assert.deepEqual(
    planPods(lm, state).map((p) => [p.name, p.rank, p.index]),
    [
      ['lm-head-0', 0, 0],
      ['lm-worker-0', 1, 0],
      ['lm-worker-1', 2, 1],
    ],
  );
});

test('a plugin applies only when asked for, with its arguments', async () => {
  const plain = job({}, task('t', 1));
  assert.deepEqual(await preparePlugins(plain), {});
  assert.deepEqual(planPods(plain, {})[0]!.env, []);
  assert.deepEqual(planPods(plain, {})[0]!.files, []);

  const quiet = job({ svc: ['--inject-hosts-env=false'] }, task('t', 1));
  const [pod] = planPods(quiet, {});
  assert.deepEqual(pod!.env, [], 'svc without its variables');
  assert.equal(pod!.files.length, 3, 'but with its files');

  const elsewhere = job({ ssh: [...KEYS, '--ssh-key-file-path=/home/me/.ssh/'] }, task('t', 1));
  const files = planPods(elsewhere, await preparePlugins(elsewhere))[0]!.files;
  assert.deepEqual(
    files.map((f) => `${f.path} ${f.mode.toString(8)}`),
    [
      '/home/me/.ssh/id_rsa 644',
      '/home/me/.ssh/id_rsa.pub 644',
      '/home/me/.ssh/authorized_keys 644',
      '/home/me/.ssh/config 644',
    ],
  );
});

test('the ssh plugin makes an RSA pair for a job that brings none; an unknown plugin names itself', async () => {
  const { ssh } = await preparePlugins(job({ ssh: [] }, task('t', 1)));
  assert.match(ssh!.privateKey, /^-----BEGIN RSA PRIVATE KEY-----/);
  assert.match(ssh!.publicKey, /^ssh-rsa [A-Za-z0-9+/=]+\n$/);
  assert.throws(
    () => jobPlugins(job({ tensorflow: [] }, task('t', 1))),
    /spec\.plugins\.tensorflow: the local backend applies the env, svc, ssh, mpi plugins, not tensorflow/,
  );
});
