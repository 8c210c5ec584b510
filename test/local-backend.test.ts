import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { resolveSecurityPolicy } from '../src/model/config.ts';
import { readManifest } from '../src/volcano/emulation/manifest.ts';
import { PEERS_ANNOTATION } from '../src/volcano/labels.ts';
import { assertExit, runCli } from './support/cli.ts';
import { openTestBackend } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { manualClock } from './support/manual-clock.ts';
import { ROOT } from './support/paths.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** The local backend with its real runtime: bubblewrap, cgroups, a network namespace per pod. */

const tools = await needs('bwrap', 'nft', 'ip');
const mpiTools = await needs('bwrap', 'mpiexec', 'sshd', 'ssh');

/**
 * One backend for the tests of one job each (every job its own id and pods); the restart tests
 * below open their own. A backend's start and close (its bridge, its pool's namespaces) cost more
 * than most of these tests.
 */
const cleanups: (() => Promise<void>)[] = [];
let sharedBackend: ReturnType<typeof openTestBackend> | undefined;
const shared = () => (sharedBackend ??= openTestBackend({ after: (fn) => void cleanups.push(fn) }));
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** Everything of a job the machine could still hold: processes, namespaces, cgroups, veths. */
function leftovers(podPrefix: string): string[] {
  const found: string[] = [];
  const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  if (ps.includes(podPrefix))
    found.push(
      `process: ${ps
        .split('\n')
        .filter((l) => l.includes(podPrefix))
        .join('; ')}`,
    );
  for (const hierarchy of ['memory', 'pids', 'cpu', 'cpuacct', 'cpuset', 'unified']) {
    try {
      const list = execFileSync(
        'find',
        [`/sys/fs/cgroup/${hierarchy}`, '-maxdepth', '3', '-name', `*${podPrefix}*`],
        { encoding: 'utf8' },
      );
      if (list.trim()) found.push(`cgroup: ${list.trim()}`);
    } catch {}
  }
  return found;
}

test(
  'the TensorFlow shape: ps and workers find each other through /etc/volcano and VK_TASK_INDEX',
  tools,
  async () => {
    const { backend, ended, output } = await shared();
    const ps = shellTask(
      'ps',
      1,
      'echo "ps $VK_TASK_INDEX on $(hostname), workers: $(tr "\\n" " " < /etc/volcano/worker.host)"',
    );
    const worker = shellTask(
      'worker',
      2,
      'echo "worker $VK_TASK_INDEX of $(cat /etc/volcano/VC_WORKER_NUM) sees ps at $(getent hosts $(cat /etc/volcano/ps.host) | cut -d" " -f1)"',
    );
    await backend.submitVolcanoJob(
      'tf',
      vcjob('tf', [ps, worker], { plugins: { env: [], svc: [] }, minAvailable: 3 }),
    );
    const end = await ended('tf');
    assert.equal(end.state, 'SUCCESS', end.status);
    const out = await output('tf');
    assert.equal(out[0], 'ps 0 on tf-ps-0, workers: tf-worker-0.tf tf-worker-1.tf\n');
    assert.match(out[1] ?? '', /^worker 0 of 2 sees ps at 10\.\d+\.\d+\.\d+\n$/);
    assert.match(out[2] ?? '', /^worker 1 of 2 sees ps at 10\.\d+\.\d+\.\d+\n$/);
    assert.equal(
      out[1]?.split(' at ')[1],
      out[2]?.split(' at ')[1],
      'both workers resolve the same ps address',
    );
  },
);

test(
  'the MPI shape runs for real: mpiexec from the master across two workers over the ssh keys',
  mpiTools,
  async () => {
    const { backend, ended, output } = await shared();
    const file = join(ROOT, 'examples/vcjobs/mpi.yaml');
    const {
      jobs: [job],
    } = readManifest(
      parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS()),
      file,
      resolveSecurityPolicy(),
    );
    await backend.submitVolcanoJob('mpi', job!);
    const end = await ended('mpi', 60_000);
    assert.equal(end.state, 'SUCCESS', end.status);
    assert.equal(backend.phaseOf('mpi'), 'Completed');
    const lines = (await output('mpi'))[0]?.trim().split('\n').sort();
    assert.deepEqual(lines, [
      'hello from rank 0 on lm-mpi-job-mpiworker-0',
      'hello from rank 1 on lm-mpi-job-mpiworker-1',
    ]);
  },
);

test(
  'a pod past its memory limit is OOM-killed, and the job is a FAILURE naming the rank',
  tools,
  async () => {
    const { backend, ended } = await shared();
    const hog = shellTask('hog', 1, 'head -c 400m /dev/zero | tail > /dev/null', { memory: '48Mi' });
    await backend.submitVolcanoJob(
      'oom',
      vcjob('oom', [hog], { policies: [{ event: 'PodFailed', action: 'TerminateJob' }] }),
    );
    const end = await ended('oom');
    assert.equal(end.state, 'FAILURE');
    assert.equal(end.status, 'Rank 0 exceeded its memory limit (OOM-killed)');
  },
);

test('pods of two jobs cannot reach each other; a peer can, by its hostname', tools, async () => {
  const { home, backend, running, ended, output } = await shared();
  const server = shellTask(
    'srv',
    1,
    `exec node -e "require('net').createServer(s => s.end('hello\\\\n')).listen(7000, () => console.log('listening'))"`,
  );
  await backend.submitVolcanoJob('server', vcjob('server', [server]));
  await running('server');
  // RUNNING is the pod's, not the server's: the clients connect once it listens (a loaded fresh
  // clone's suite, 12:38 today, had the peer refused by a server still starting).
  await until(async () => (await output('server'))[0]?.includes('listening'), {
    describe: 'the server pod listens on port 7000',
  });
  // The pod's /etc/hosts is among its records (the runtime's pods folder), one file per pod.
  const pods = join(home, 'local/runtime/pods');
  const serverPod = (await readdir(pods)).find((name) => name.includes('srv'));
  assert.ok(serverPod, 'the server pod has its records');
  const hosts = await readFile(join(pods, serverPod, 'hosts'), 'utf8');
  const ip = /^(\S+)\s+server-srv-0/m.exec(hosts)?.[1];
  assert.ok(ip, hosts);
  const client = (target: string) =>
    shellTask(
      'cli',
      1,
      `node -e "const s = require('net').connect(7000, '${target}'); s.setTimeout(1500, () => { console.log('refused'); process.exit(0); }); s.on('data', d => { process.stdout.write(d); process.exit(0); }); s.on('error', () => { console.log('refused'); process.exit(0); })"`,
    );
  await backend.submitVolcanoJob('stranger', vcjob('stranger', [client(ip)]));
  const peerJob = vcjob('friend', [client('server')]);
  peerJob.metadata.annotations = {
    [PEERS_ANNOTATION]: JSON.stringify([{ hostname: 'server', jobId: 'server' }]),
  };
  await backend.submitVolcanoJob('friend', peerJob);
  await ended('stranger');
  await ended('friend');
  assert.equal((await output('stranger'))[0], 'refused\n');
  assert.equal((await output('friend'))[0], 'hello\n');
});

test('cancel stops every process of a job and leaves nothing behind', tools, async () => {
  const { backend, running } = await shared();
  // Known by a duration no other process on the machine has (launcher.test.ts runs `sleep 600`).
  const sleep = `sleep 600.${process.pid}`;
  await backend.submitVolcanoJob(
    'stubborn',
    vcjob('stubborn', [shellTask('t', 2, `trap "" TERM; ${sleep} & ${sleep}`)]),
  );
  await running('stubborn');
  // RUNNING says its containers were started; the command comes a moment later (bubblewrap first).
  await until(() => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(sleep), {
    describe: 'the job’s sleep runs',
  });
  await backend.cancel('stubborn');
  assert.equal(backend.phaseOf('stubborn'), 'Terminated');
  assert.deepEqual(leftovers('stubborn-t-'), []);
  const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  assert.ok(!ps.includes(sleep), 'no sleep left');
  const netns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  assert.ok(!netns.includes('stubborn'), netns);
});

test(
  'a pod found again after a restart of ucompute keeps its activeDeadlineSeconds, counted from its start',
  tools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-deadline-'));
    const clock = manualClock();
    const first = await openTestBackend(t, { dir, clock });
    const task = shellTask('t', 1, 'sleep 1000');
    task.template.spec.activeDeadlineSeconds = 10;
    await first.backend.submitVolcanoJob('timed', vcjob('timed', [task]));
    await first.running('timed');
    await clock.advance(6000);
    await first.close(); // the pod runs on; the deadline timer of this ucompute dies with it

    const second = await openTestBackend(t, { dir, clock });
    t.after(() => rm(dir, { recursive: true, force: true }));
    assert.equal(second.backend.phaseOf('timed'), 'Running');
    await clock.advance(3999);
    assert.equal(second.backend.phaseOf('timed'), 'Running', 'not before 10 s after the pod started');
    await clock.advance(1);
    const end = await second.ended('timed');
    assert.equal(end.state, 'FAILURE');
    assert.match(end.status, /^Rank 0 was stopped: DeadlineExceeded/);
  },
);

test(
  'a restart of ucompute finds running pods again and still learns how they end, never running them twice',
  tools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-restart-'));
    const first = await openTestBackend(t, { dir });
    await mkdir(join(dir, 'control'));
    await writeFile(join(dir, 'control/go'), '');
    const task = shellTask(
      't',
      2,
      'echo started; until [ -e /control/speak ]; do sleep 0.1; done; echo spoke; while [ -e /control/go ]; do sleep 0.1; done; exit $VC_TASK_INDEX',
    );
    task.template.spec.volumes = [{ name: 'control', hostPath: { path: join(dir, 'control') } }];
    task.template.spec.containers[0]!.volumeMounts = [{ name: 'control', mountPath: '/control' }];
    await first.backend.submitVolcanoJob('long', vcjob('long', [task], { plugins: { env: [] } }));
    await first.running('long');
    await first.close(); // ucompute stops; the pods do not, and their output keeps reaching its files
    await writeFile(join(dir, 'control/speak'), '');
    const spoken = (rank: number) => readFile(join(dir, 'local/jobs/long/logs', `${rank}.t.out`), 'utf8');
    await until(async () => (await spoken(0)).includes('spoke') && (await spoken(1)).includes('spoke'), {
      describe: 'both ranks speak while ucompute is down',
    });

    const second = await openTestBackend(t, { dir });
    // After the backends' own clean-up (hooks run in order): the runtime unmounts its tmpfs at close.
    t.after(() => rm(dir, { recursive: true, force: true }));
    assert.deepEqual([...(await second.backend.knownJobs())], ['long']);
    assert.equal(second.backend.phaseOf('long'), 'Running');
    await rm(join(dir, 'control/go'));
    const end = await second.ended('long');
    assert.equal(end.state, 'SUCCESS', end.status);
    assert.deepEqual(
      end.exitCodes,
      { 0: 0, 1: 1 },
      'exit codes of pods that ended while another ucompute watched',
    );
    const out = await second.output('long');
    assert.equal(out[0], 'started\nspoke\n', 'each rank ran once, and spoke while ucompute was down');
    assert.equal(out[1], 'started\nspoke\n');
  },
);

test(
  'ucompute vcjob run runs a manifest, prints phases and output, and exits 0 only when it Completed',
  tools,
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-vcjob-'));
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    const ok = await runCli([
      'vcjob',
      'run',
      join(ROOT, 'examples/vcjobs/tensorflow.yaml'),
      '--data-dir',
      dataDir,
    ]);
    assertExit(ok, 0);
    assert.match(
      ok.stdout,
      /^\[2\] TF_CONFIG=\{"cluster":\{"ps":\["tensorflow-dist-mnist-ps-0\.tensorflow-dist-mnist:2222"\].*"task":\{"type":"worker","index":1\}\}$/m,
    );
    // The workers' CompleteJob policy may stop the ps before it ends by itself: both end Completed,
    // and the end message says which happened.
    assert.match(
      ok.stderr,
      /phase Running\n[\s\S]*phase Completed\n.*(The job finished \(exit code 0 on every rank\)|The job completed \(task worker completed; its policy: CompleteJob\))/,
    );

    const failing = join(dataDir, 'failing.yaml');
    await writeFile(
      failing,
      'apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: { name: failing }\nspec:\n  tasks:\n    - name: t\n      replicas: 1\n      template: { spec: { restartPolicy: Never, containers: [{ name: c, image: debian, command: [sh, -c, "echo oops >&2; exit 4"] }] } }\n',
    );
    const bad = await runCli(['vcjob', 'run', failing, '--data-dir', dataDir, '--follow']);
    assertExit(bad, 1);
    assert.match(bad.stderr, /^\[0\] oops$/m);
    assert.match(bad.stderr, /phase Failed\n/);
    assert.match(bad.stderr, /failing: The job ended \(Failed\): rank 0 exited with code 4\n/);

    const invalid = join(dataDir, 'invalid.yaml');
    await writeFile(
      invalid,
      'apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: { name: x }\nspec: { tasks: [] }\n',
    );
    const refused = await runCli(['vcjob', 'run', invalid, '--data-dir', dataDir]);
    assertExit(refused, 2);
    assert.match(refused.stderr, /spec\.tasks: must list at least one task/);
  },
);
