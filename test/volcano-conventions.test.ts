import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TaskSpec, VolcanoJob } from '../src/volcano/api/types.ts';
import {
  envPluginVariables,
  podName,
  sshConfig,
  sshPluginOptions,
  svcData,
  svcPluginOptions,
  svcVariables,
  taskHosts,
  taskIndexFromPodName,
} from '../src/volcano/emulation/conventions.ts';
import { dnsLabel, labelValue, volcanoJobName } from '../src/volcano/names.ts';

const task = (
  name: string,
  replicas: number,
  spec: Partial<TaskSpec['template']['spec']> = {},
): TaskSpec => ({
  name,
  replicas,
  template: { spec: { containers: [{ name: 'c', image: 'i' }], ...spec } },
});

const job = (...tasks: TaskSpec[]): VolcanoJob => ({
  apiVersion: 'batch.volcano.sh/v1alpha1',
  kind: 'Job',
  metadata: { name: 'tf' },
  spec: { tasks },
});

describe('env plugin', () => {
  test('the task index is the last segment of the pod name, in VK_ and VC_TASK_INDEX', () => {
    assert.equal(podName('tf', 'worker', 2), 'tf-worker-2');
    assert.deepEqual(envPluginVariables('tf-worker-2'), { VK_TASK_INDEX: '2', VC_TASK_INDEX: '2' });
    assert.equal(taskIndexFromPodName('j-abc-job-10'), '10');
    assert.equal(taskIndexFromPodName('short-name'), '', 'fewer than three segments give nothing');
  });
});

describe('svc plugin', () => {
  const tf = job(task('ps', 1), task('worker', 2), task('mpi-worker', 1));

  test('one host per replica, <pod>.<job>', () => {
    assert.deepEqual(
      taskHosts('tf', task('worker', 2)).map((h) => `${h.hostname}.${h.subdomain}`),
      ['tf-worker-0.tf', 'tf-worker-1.tf'],
    );
  });

  test('a template that fixes its hostname gives one host, with its subdomain', () => {
    assert.deepEqual(taskHosts('tf', task('db', 3, { hostname: 'db', subdomain: 'data' })), [
      { hostname: 'db', subdomain: 'data' },
    ]);
  });

  test('host files, HOSTS and NUM keys per task; - becomes _ and TASK is upper case', () => {
    assert.deepEqual(svcData(tf), {
      'ps.host': 'tf-ps-0.tf',
      VC_PS_HOSTS: 'tf-ps-0.tf',
      VC_PS_NUM: '1',
      'worker.host': 'tf-worker-0.tf\ntf-worker-1.tf',
      VC_WORKER_HOSTS: 'tf-worker-0.tf,tf-worker-1.tf',
      VC_WORKER_NUM: '2',
      'mpi_worker.host': 'tf-mpi-worker-0.tf',
      VC_MPI_WORKER_HOSTS: 'tf-mpi-worker-0.tf',
      VC_MPI_WORKER_NUM: '1',
    });
    assert.deepEqual(Object.keys(svcVariables(tf)).sort(), [
      'VC_MPI_WORKER_HOSTS',
      'VC_MPI_WORKER_NUM',
      'VC_PS_HOSTS',
      'VC_PS_NUM',
      'VC_WORKER_HOSTS',
      'VC_WORKER_NUM',
    ]);
  });

  test('arguments parse like Go flags, with Volcano defaults', () => {
    assert.deepEqual(svcPluginOptions([]), {
      publishNotReadyAddresses: false,
      disableNetworkPolicy: false,
      injectHostsEnv: true,
    });
    assert.deepEqual(
      svcPluginOptions([
        '--publish-not-ready-addresses',
        '-disable-network-policy=true',
        '--inject-hosts-env=false',
      ]),
      {
        publishNotReadyAddresses: true,
        disableNetworkPolicy: true,
        injectHostsEnv: false,
      },
    );
  });
});

describe('ssh plugin', () => {
  test('config: no host key checks, then one stanza per host', () => {
    assert.equal(
      sshConfig(job(task('mpimaster', 1), task('mpiworker', 2))),
      [
        'StrictHostKeyChecking no',
        'UserKnownHostsFile /dev/null',
        'Host tf-mpimaster-0',
        '  HostName tf-mpimaster-0.tf',
        '  Port 22',
        'Host tf-mpiworker-0',
        '  HostName tf-mpiworker-0.tf',
        '  Port 22',
        'Host tf-mpiworker-1',
        '  HostName tf-mpiworker-1.tf',
        '  Port 22',
        '',
      ].join('\n'),
    );
  });

  test('arguments: key path, port (out of range falls back to 22), given keys', () => {
    assert.deepEqual(sshPluginOptions([]), { keyFilePath: '/root/.ssh', port: 22 });
    assert.deepEqual(sshPluginOptions(['--ssh-key-file-path=/home/u/.ssh', '--ssh-port=2222']), {
      keyFilePath: '/home/u/.ssh',
      port: 2222,
    });
    assert.equal(sshPluginOptions(['--ssh-port=70000']).port, 22);
    assert.equal(sshPluginOptions(['-ssh-private-key=KEY']).privateKey, 'KEY');
  });
});

describe('names', () => {
  test('Volcano Job names are j-<id>', () => {
    assert.equal(volcanoJobName('mh3k2x9'), 'j-mh3k2x9');
  });

  test('dnsLabel keeps clean names and hashes changed ones, never over 63 characters', () => {
    assert.equal(dnsLabel('ucompute-u-', 'alice'), 'ucompute-u-alice');
    const a = dnsLabel('ucompute-u-', 'john.doe');
    const b = dnsLabel('ucompute-u-', 'john_doe');
    assert.match(a, /^ucompute-u-john-doe-[0-9a-f]{8}$/);
    assert.notEqual(a, b, 'names that clean up alike stay distinct');
    const long = dnsLabel('ucompute-p-', 'x'.repeat(100));
    assert.ok(long.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(long), long);
  });

  test('labelValue keeps valid values and makes others valid', () => {
    assert.equal(labelValue('u-alice'), 'u-alice');
    assert.match(labelValue('u-Alice Smith!'), /^u-alice-smith-[0-9a-f]{8}$/);
  });
});
