import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Runtime } from '../src/backends/local/runtime.ts';
import type { LifecyclePolicy } from '../src/volcano/api/types.ts';
import { PIDS_LIMIT_ANNOTATION } from '../src/volcano/labels.ts';
import { manualClock } from './support/manual-clock.ts';
import { processBackend as setup } from './support/process-backend.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** The Volcano job controller's semantics, carried out by the local backend on plain processes. */

test('a multi-replica job runs every replica with the env and svc plugins, and reports exit codes per rank', async (t) => {
  const { backend, runtime, ended, logs, events } = await setup(t);
  const job = vcjob(
    'hello',
    [shellTask('work', 3, 'echo "rank $VC_TASK_INDEX of $VC_WORK_NUM: $VC_WORK_HOSTS"')],
    {
      plugins: { env: [], svc: [] },
    },
  );
  await backend.submitVolcanoJob('hello', job);
  const end = await ended('hello');
  assert.equal(end.state, 'SUCCESS');
  assert.equal(end.status, 'The job finished (exit code 0 on every rank)');
  assert.deepEqual(end.exitCodes, { 0: 0, 1: 0, 2: 0 });
  assert.equal(backend.phaseOf('hello'), 'Completed');
  assert.ok(events.some((e) => e.jobId === 'hello' && e.state === 'RUNNING'));
  const out = (await logs('hello')).map((c) => `${c.rank}:${c.stdout}`).sort();
  const hosts = 'hello-work-0.hello,hello-work-1.hello,hello-work-2.hello';
  assert.deepEqual(
    out,
    [0, 1, 2].map((r) => `${r}:rank ${r} of 3: ${hosts}\n`),
  );
  const pod = runtime.pods.get('hello-work-1')!;
  assert.equal(pod.spec.hostname, 'hello-work-1');
  const c = pod.containers[0]!;
  assert.equal(c.env.VK_TASK_INDEX, '1');
  assert.equal(c.env.VC_TASK_INDEX, '1');
  const files = Object.fromEntries(c.files.map((f) => [f.path, f.content]));
  assert.equal(files['/etc/volcano/work.host'], hosts.replaceAll(',', '\n'));
  assert.equal(files['/etc/volcano/VC_WORK_NUM'], '3');
  assert.deepEqual(pod.peers.length, 3, 'each pod may talk to the 3 pods of its job');
});

test("each pod's /etc/hosts is a file of its own naming every pod of the job; an older ucompute's job file is kept up to date", async (t) => {
  const { backend, runtime, ended, stateDir } = await setup(t);
  // The job's folder as an older ucompute left it: its running pods bind the job's hosts file.
  const older = join(stateDir, 'jobs', 'pair', 'hosts');
  await mkdir(join(stateDir, 'jobs', 'pair'), { recursive: true });
  await writeFile(older, '');
  await backend.submitVolcanoJob('pair', vcjob('pair', [shellTask('w', 2, 'true')]));
  await ended('pair');
  const sources = [0, 1].map(
    (i) =>
      runtime.pods.get(`pair-w-${i}`)!.containers[0]!.mounts.find((m) => m.target === '/etc/hosts')?.source,
  );
  assert.ok(sources[0] && sources[1] && sources[0] !== sources[1], `one file per pod: ${sources.join(', ')}`);
  for (const file of [...sources, older]) {
    const text = await readFile(file!, 'utf8');
    for (const i of [0, 1])
      assert.match(text, new RegExp(`^\\S+\\tpair-w-${i}\\.pair pair-w-${i}$`, 'm'), `${file}: ${text}`);
  }
});

test('the ssh plugin gives every pod the same fresh key pair and a config naming every host', async (t) => {
  const { backend, runtime, ended } = await setup(t);
  await backend.submitVolcanoJob(
    'mpi',
    vcjob('mpi', [shellTask('master', 1, 'true'), shellTask('worker', 2, 'true')], {
      plugins: { ssh: [], svc: [] },
    }),
  );
  await ended('mpi');
  const files = (pod: string) =>
    Object.fromEntries(runtime.pods.get(pod)!.containers[0]!.files.map((f) => [f.path, f]));
  const a = files('mpi-master-0');
  const b = files('mpi-worker-1');
  assert.match(a['/root/.ssh/id_rsa']!.content, /^-----BEGIN RSA PRIVATE KEY-----/);
  assert.match(a['/root/.ssh/id_rsa.pub']!.content, /^ssh-rsa [A-Za-z0-9+/=]+\n$/);
  assert.equal(a['/root/.ssh/authorized_keys']!.content, a['/root/.ssh/id_rsa.pub']!.content);
  assert.equal(a['/root/.ssh/id_rsa']!.content, b['/root/.ssh/id_rsa']!.content);
  assert.equal(a['/root/.ssh/id_rsa']!.mode, 0o600);
  assert.match(
    a['/root/.ssh/config']!.content,
    /Host mpi-worker-1\n {2}HostName mpi-worker-1\.mpi\n {2}Port 22\n/,
  );
});

test('PodFailed → RestartJob restarts the whole job until maxRetry, then the job is Failed', async (t) => {
  const { backend, ended, logs } = await setup(t);
  const policies: LifecyclePolicy[] = [{ event: 'PodFailed', action: 'RestartJob' }];
  await backend.submitVolcanoJob(
    'retry',
    vcjob('retry', [shellTask('t', 2, 'echo run; exit $VC_TASK_INDEX')], {
      policies,
      maxRetry: 2,
      plugins: { env: [] },
    }),
  );
  const end = await ended('retry');
  assert.equal(backend.phaseOf('retry'), 'Failed');
  assert.equal(end.state, 'SUCCESS', 'the application failed, not the platform');
  // Rank 1 fails each run, after its echo; rank 0 may be stopped by a restart before its own.
  assert.match(
    end.status,
    /^The job ended \(Failed\): rank 1 exited with code 1(; rank 0 was stopped before it ended by itself)?$/,
  );
  const runs = (await logs('retry'))
    .filter((c) => c.rank === 1)
    .map((c) => c.stdout)
    .join('');
  assert.equal(runs, 'run\nrun\n', 'the first run and one restart (maxRetry 2)');
});

test('TaskCompleted → CompleteJob ends the job when its master finishes, stopping the workers', async (t) => {
  const { backend, ended } = await setup(t);
  const master = shellTask('master', 1, 'sleep 0.2', {
    extra: {
      policies: [{ event: 'TaskCompleted', action: 'CompleteJob' }],
    },
  });
  await backend.submitVolcanoJob('tc', vcjob('tc', [master, shellTask('worker', 2, 'sleep 30')]));
  const end = await ended('tc');
  assert.equal(backend.phaseOf('tc'), 'Completed');
  assert.equal(end.state, 'SUCCESS');
  assert.deepEqual(end.exitCodes, { 0: 0 }, 'the killed workers report no exit code');
});

test('minSuccess completes the job once enough pods succeeded', async (t) => {
  const { backend, ended } = await setup(t);
  await backend.submitVolcanoJob(
    'ms',
    vcjob('ms', [shellTask('t', 3, 'if [ "$VC_TASK_INDEX" = 2 ]; then sleep 30; fi')], {
      minSuccess: 2,
      plugins: { env: [] },
    }),
  );
  await ended('ms');
  assert.equal(backend.phaseOf('ms'), 'Completed');
});

test('a failed pod without a policy fails the job once every pod has ended', async (t) => {
  const { backend, ended } = await setup(t);
  await backend.submitVolcanoJob(
    'nf',
    vcjob('nf', [shellTask('t', 2, 'exit $VC_TASK_INDEX')], { plugins: { env: [] } }),
  );
  const end = await ended('nf');
  assert.equal(backend.phaseOf('nf'), 'Failed');
  assert.deepEqual(end.exitCodes, { 0: 0, 1: 1 });
});

test('restartPolicy OnFailure restarts a container in place until the task reaches maxRetry (TaskFailed)', async (t) => {
  const { backend, ended, logs } = await setup(t);
  const flaky = shellTask('t', 1, 'echo try; exit 3', {
    extra: {
      maxRetry: 2,
      policies: [{ event: 'TaskFailed', action: 'TerminateJob' }],
    },
  });
  flaky.template.spec.restartPolicy = 'OnFailure';
  await backend.submitVolcanoJob('of', vcjob('of', [flaky]));
  const end = await ended('of');
  assert.equal(backend.phaseOf('of'), 'Terminated');
  assert.deepEqual(end.exitCodes, { 0: 3 });
  assert.equal((await logs('of')).map((c) => c.stdout).join(''), 'try\ntry\n');
});

test('an out-of-memory kill is a FAILURE that names the rank', async (t) => {
  const { backend, ended } = await setup(t);
  const oom = shellTask('t', 1, 'kill -9 $$$$'); // `$$` is Kubernetes' escaped `$`
  oom.template.spec.containers[0]!.env = [{ name: 'FAKE_OOM', value: '1' }];
  await backend.submitVolcanoJob(
    'oom',
    vcjob('oom', [oom], { policies: [{ event: 'PodFailed', action: 'TerminateJob' }] }),
  );
  const end = await ended('oom');
  assert.equal(end.state, 'FAILURE');
  assert.equal(end.status, 'Rank 0 exceeded its memory limit (OOM-killed)');
});

test("each replica's pod gets the product's process limit; without one, the runtime's default", async (t) => {
  const { backend, runtime, ended } = await setup(t);
  const limited = vcjob('limited', [shellTask('t', 2, 'true')]);
  limited.metadata.annotations = { [PIDS_LIMIT_ANNOTATION]: '300' };
  await backend.submitVolcanoJob('limited', limited);
  await backend.submitVolcanoJob('open', vcjob('open', [shellTask('t', 1, 'true')]));
  await Promise.all([ended('limited'), ended('open')]);
  const pids = (prefix: string) =>
    [...runtime.pods.values()].filter((p) => p.spec.name.startsWith(prefix)).map((p) => p.spec.limits.pids);
  assert.deepEqual(pids('limited-'), [300, 300]);
  assert.deepEqual(pids('open-'), [null]);
});

test('a gang waits, with its reason and position, until all its replicas fit; then it starts whole', async (t) => {
  const { backend, ended, events, runtime } = await setup(t, { cpuMillis: 2000, memoryBytes: 2 ** 30 });
  await backend.submitVolcanoJob('big', vcjob('big', [shellTask('t', 1, 'sleep 0.3', { cpu: '2' })]));
  await backend.submitVolcanoJob('gang', vcjob('gang', [shellTask('t', 2, 'true', { cpu: '1' })]));
  const queued = await until(() => events.find((e) => e.jobId === 'gang' && e.state === 'IN_QUEUE'), {
    describe: 'the gang is told it waits',
  });
  assert.match(
    queued.status,
    /^In the queue, position 1: waiting for 2 CPUs and 0.13 GiB of memory \(0 CPUs and 0.94 GiB of memory free now\)$/,
  );
  assert.equal(runtime.pods.has('gang-t-0'), false, 'no replica of the gang starts alone');
  await ended('big');
  assert.equal((await ended('gang')).state, 'SUCCESS');
});

test('a gang larger than the machine stays Pending saying why, as Volcano keeps it; a cancel ends it', async (t) => {
  const { backend, ended, events } = await setup(t, { cpuMillis: 2000, memoryBytes: 2 ** 30 });
  await backend.submitVolcanoJob('huge', vcjob('huge', [shellTask('t', 3, 'true', { cpu: '1' })]));
  const pending = await until(() => events.find((e) => e.jobId === 'huge' && e.state === 'IN_QUEUE'), {
    describe: 'the gang says why it waits',
  });
  assert.equal(
    pending.status,
    'Pending, unschedulable: the gang needs 3 CPUs and 0.19 GiB of memory; this machine offers 2 CPUs and 1 GiB of memory (0/1 nodes are unavailable: 1 Insufficient cpu)',
  );
  await backend.submitVolcanoJob('small', vcjob('small', [shellTask('t', 1, 'true', { cpu: '1' })]));
  assert.equal((await ended('small')).state, 'SUCCESS', 'a job behind it runs');
  assert.equal(backend.phaseOf('huge'), 'Pending');
  await backend.cancel('huge');
  assert.equal((await ended('huge')).status, 'The job ended (Terminated) before any replica started');
});

test('cancel stops every process of a running job, with SIGKILL after the grace period for those ignoring SIGTERM', async (t) => {
  const { backend, events, runtime } = await setup(t);
  await backend.submitVolcanoJob('c', vcjob('c', [shellTask('t', 2, 'trap "" TERM; sleep 30')]));
  await until(() => events.some((e) => e.jobId === 'c' && e.state === 'RUNNING'), {
    describe: 'the job runs',
  });
  await backend.cancel('c');
  assert.equal(backend.phaseOf('c'), 'Terminated');
  // Only SIGKILL ends them: the shells ignore SIGTERM, and so do their sleeps.
  assert.equal(runtime.live(), 0);
  assert.ok([...runtime.pods.values()].every((p) => p.destroyed));
});

test('dependsOn: a task starts once the tasks it depends on have their pods running, as the controller waits', async (t) => {
  const { backend, ended, runtime } = await setup(t);
  const server = shellTask('server', 2, 'sleep 0.4');
  const client = shellTask('client', 1, 'true', { extra: { dependsOn: { name: ['server'] } } });
  // What the servers had started when the client's pod was made: their containers run (a look at
  // the pods after the fact raced the client, made a few milliseconds after the servers ran).
  const createPod = runtime.createPod.bind(runtime);
  let serversAtClient: number[] | undefined;
  runtime.createPod = async (spec) => {
    if (spec.name === 'dep-client-0') {
      serversAtClient = ['dep-server-0', 'dep-server-1'].map(
        (name) => runtime.pods.get(name)?.containers.length ?? 0,
      );
    }
    return createPod(spec);
  };
  await backend.submitVolcanoJob('dep', vcjob('dep', [client, server], { minAvailable: 2 }));
  await ended('dep');
  assert.deepEqual(serversAtClient, [1, 1], "the client's pod is made once both servers' containers run");
  assert.equal(backend.phaseOf('dep'), 'Completed');
  assert.deepEqual([...runtime.pods.keys()], ['dep-server-0', 'dep-server-1', 'dep-client-0']);
});

test('dependsOn a task that ran to its end: its Succeeded pods count, as Volcano counts them', async (t) => {
  // An init-like task fills the machine, so the task that depends on it can only start once it has
  // ended: Volcano's isDependsOnPodsReady counts Succeeded pods as ready (volcano-sh/volcano
  // ca9feff, v1.16); counting only Running ones would leave `main` waiting for ever.
  const { backend, ended, runtime } = await setup(t, { cpuMillis: 1000, memoryBytes: 2 ** 30 });
  const init = shellTask('init', 1, 'echo prepared', { cpu: '1' });
  const main = shellTask('main', 1, 'echo ran', { cpu: '1', extra: { dependsOn: { name: ['init'] } } });
  await backend.submitVolcanoJob('seq', vcjob('seq', [init, main], { minAvailable: 1 }));
  const end = await ended('seq');
  assert.equal(end.state, 'SUCCESS');
  assert.deepEqual(end.exitCodes, { 0: 0, 1: 0 });
  assert.deepEqual([...runtime.pods.keys()], ['seq-init-0', 'seq-main-0']);
});

test('capacity is judged on minAvailable: an elastic job starts its gang, the rest wait for room', async (t) => {
  const { backend, ended, runtime } = await setup(t, { cpuMillis: 2000, memoryBytes: 2 ** 30 });
  const work = shellTask('w', 4, 'sleep 0.3', { cpu: '1' });
  await backend.submitVolcanoJob('elastic', vcjob('elastic', [work], { minAvailable: 2 }));
  let podsWhenRunning: number | undefined;
  backend.onEvent((e) => {
    if (e.jobId === 'elastic' && e.state === 'RUNNING') podsWhenRunning ??= runtime.pods.size;
  });
  await until(() => podsWhenRunning !== undefined, { describe: 'the job runs on its gang alone' });
  assert.equal(podsWhenRunning, 2, 'the gang of 2 fills the 2 CPUs; the other 2 replicas wait');
  const end = await ended('elastic');
  assert.equal(end.state, 'SUCCESS');
  assert.deepEqual(end.exitCodes, { 0: 0, 1: 0, 2: 0, 3: 0 }, 'every replica ran once room freed');
  assert.equal(backend.phaseOf('elastic'), 'Completed');
});

test('TaskFailed without a matching policy keeps the job Running while the container restarts, as the controller does', async (t) => {
  const clock = manualClock();
  const { backend, events, logs } = await setup(t, undefined, clock);
  const flaky = shellTask('t', 1, 'echo try; exit 3', { extra: { maxRetry: 1 } });
  flaky.template.spec.restartPolicy = 'OnFailure';
  await backend.submitVolcanoJob('tf', vcjob('tf', [flaky]));
  const tries = async () => (await logs('tf')).map((c) => c.stdout).join('');
  // One restart in place (maxRetry 1), then the kubelet's back-off: 10 s, then 20 s.
  const backoff = async (ms: number) => {
    await until(() => clock.pending() === 1, { describe: 'the container waits for its back-off' });
    assert.equal(clock.nextDue(), clock.now() + ms);
  };
  await backoff(10_000);
  assert.equal(await tries(), 'try\ntry\n');
  await clock.advance(9_999);
  assert.equal(clock.pending(), 1, 'not restarted before its back-off');
  await clock.advance(1);
  await until(async () => (await tries()) === 'try\ntry\ntry\n', { describe: 'the third try' });
  await backoff(20_000);
  assert.equal(backend.phaseOf('tf'), 'Running');
  assert.ok(!events.some((e) => e.jobId === 'tf' && (e.state === 'SUCCESS' || e.state === 'FAILURE')));
  await backend.cancel('tf');
  assert.equal(backend.phaseOf('tf'), 'Terminated');
});

test('numeric quantities (cpu: 1, memory: 1024) count as the same quantities written as text', async (t) => {
  const { backend, ended, events } = await setup(t, { cpuMillis: 1000, memoryBytes: 2 ** 30 });
  const numeric = shellTask('t', 1, 'true');
  numeric.template.spec.containers[0]!.resources = { limits: { cpu: 1, memory: 2 ** 29 } };
  await backend.submitVolcanoJob('num', vcjob('num', [numeric]));
  assert.equal((await ended('num')).state, 'SUCCESS');
  const huge = shellTask('t', 1, 'true');
  huge.template.spec.containers[0]!.resources = { requests: { cpu: 2 } };
  await backend.submitVolcanoJob('two', vcjob('two', [huge]));
  const waits = await until(() => events.find((e) => e.jobId === 'two' && e.state === 'IN_QUEUE'), {
    describe: 'the two-CPU job says why it waits',
  });
  assert.match(
    waits.status,
    /^Pending, unschedulable: the gang needs 2 CPUs and 0 GiB of memory; this machine offers 1 CPU/,
  );
});

test('an empty subdomain is a missing one: hosts are <pod>.<job>, as the svc plugin makes them', async (t) => {
  const { backend, ended, logs } = await setup(t);
  const task = shellTask('t', 2, 'echo $$VC_T_HOSTS');
  task.template.spec.subdomain = '';
  await backend.submitVolcanoJob('sub', vcjob('sub', [task], { plugins: { svc: [] } }));
  await ended('sub');
  assert.equal((await logs('sub'))[0]?.stdout, 'sub-t-0.sub,sub-t-1.sub\n');
});

/** Pods whose destroy does its work and then throws, as a pod whose processes outlived SIGKILL does. */
function failingDestroys(runtime: Runtime, fails: (pod: string) => boolean): void {
  const createPod = runtime.createPod.bind(runtime);
  runtime.createPod = async (spec) => {
    const pod = await createPod(spec);
    if (!fails(spec.name)) return pod;
    const destroy = async (graceMs: number) => {
      await pod.destroy(graceMs);
      throw new Error('processes 1 survived SIGKILL');
    };
    return { ...pod, destroy };
  };
}

test('a pod that cannot be destroyed when its container exited fails its job, and ucompute goes on', async (t) => {
  const { backend, runtime, ended } = await setup(t);
  failingDestroys(runtime, (pod) => pod.startsWith('stuck-'));
  await backend.submitVolcanoJob('stuck', vcjob('stuck', [shellTask('t', 1, 'true')]));
  const end = await ended('stuck');
  assert.equal(end.state, 'FAILURE');
  assert.equal(end.status, 'ucompute could not run the job: processes 1 survived SIGKILL');
  await backend.submitVolcanoJob('after', vcjob('after', [shellTask('t', 1, 'true')]));
  assert.equal((await ended('after')).state, 'SUCCESS');
});

test('a job whose end cannot destroy a pod still ends, saying which rank could not be stopped', async (t) => {
  const { backend, runtime, ended } = await setup(t);
  // minSuccess completes the job while rank 2 still runs: the job's end (finish) destroys it.
  failingDestroys(runtime, (pod) => pod === 'end-t-2');
  await backend.submitVolcanoJob(
    'end',
    vcjob('end', [shellTask('t', 3, 'if [ "$VC_TASK_INDEX" = 2 ]; then sleep 30; fi')], {
      minSuccess: 2,
      plugins: { env: [] },
    }),
  );
  const end = await ended('end');
  assert.equal(backend.phaseOf('end'), 'Completed');
  assert.equal(end.state, 'FAILURE');
  assert.equal(end.status, 'ucompute could not stop rank 2: processes 1 survived SIGKILL');
});
