import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import {
  type ProbeWorker,
  podProbes,
  probeResult,
  probesNow,
} from '../src/backends/local/controller/probes.ts';
import { resolveSecurityPolicy } from '../src/model/config.ts';
import type { Container, TaskSpec } from '../src/volcano/api/types.ts';
import { readManifest } from '../src/volcano/emulation/manifest.ts';
import type { PodPlan } from '../src/volcano/emulation/plugins/plugin.ts';
import { type ManualClock, manualClock } from './support/manual-clock.ts';
import { ROOT } from './support/paths.ts';
import { processBackend } from './support/process-backend.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/**
 * Readiness, liveness and startup probes on the local backend, as the kubelet's prober runs them:
 * on the controller's clock (a manual one here), their handlers against the pod (exec as a command,
 * httpGet and tcpSocket through its port), and what they lead to: dependsOn waits for Ready, a
 * failed liveness probe restarts the container, a failed startup probe fails a Never pod.
 */

const scratch = async (t: { after(fn: () => Promise<void>): void }) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-probes-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
};
const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').length - 1 : 0);
/** A command that counts its runs in `file`, then tests `condition`: the test waits on the count. */
const counted = (file: string, condition: string) => ['sh', '-c', `echo >> ${file}; ${condition}`];

/**
 * Moves the clock one probe period once the probe has run `ran` times and is over: its timeout timer
 * gone, the next tick (a period on) the one timer armed. The probe's period and timeout must differ.
 */
async function nextProbe(clock: ManualClock, file: string, ran: number, periodMs: number) {
  await until(() => lines(file) >= ran, { describe: `probe run ${ran} starts` });
  await probesIdle(clock, 1, periodMs);
  await clock.advance(periodMs);
}

/** Waits until no probe is under way: only the `workers` next ticks are armed, a period on. */
const probesIdle = (clock: ManualClock, workers: number, periodMs: number) =>
  until(() => clock.pending() === workers && clock.nextDue() === clock.now() + periodMs, {
    describe: 'the probes are over and their next ticks armed',
  });

/** A port nothing listens on now (the kernel's pick, released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test("Volcano's task-start-dependency example: job-nginx2 starts only once job-nginx1 is Ready", async (t) => {
  const dir = await scratch(t);
  const clock = manualClock();
  const { backend, events, runtime, ended } = await processBackend(t, undefined, clock);
  const [doc] = parseAllDocuments(
    readFileSync(join(ROOT, 'test/fixtures/volcano-examples/task-start-dependency/job.yaml'), 'utf8'),
  ).map((d) => d.toJS());
  const tasks = doc.spec.tasks as TaskSpec[];
  for (const task of tasks) task.template.spec.containers[0]!.command = ['sh', '-c', 'sleep 0.1'];
  // job-nginx1 serves until told to stop, and is Ready once a file appears.
  const nginx1 = tasks[0]!.template.spec.containers[0]!;
  nginx1.command = ['sh', '-c', `while [ ! -e ${dir}/done ]; do sleep 0.2; done`];
  const probes = join(dir, 'probes');
  nginx1.readinessProbe = { exec: { command: counted(probes, `test -e ${dir}/ready`) }, periodSeconds: 2 };
  const { jobs } = readManifest([doc], 'job.yaml', resolveSecurityPolicy());
  await backend.submitVolcanoJob('dep', jobs[0]!);
  const made = (task: string) => [...runtime.pods.keys()].filter((name) => name.includes(`-${task}-`)).length;

  for (let ran = 1; ran <= 3; ran++) await nextProbe(clock, probes, ran, 2000);
  const notReady = await until(() => events.find((e) => e.jobId === 'dep' && /not Ready/.test(e.status)), {
    describe: 'the reason job-nginx1 is not Ready is told',
  });
  assert.match(
    notReady.status,
    /^Rank 0: container nginx failed its readiness probe \(exec sh -c .*\) 3 times in a row: exit code 1; it is not Ready$/,
  );
  assert.equal(backend.phaseOf('dep'), 'Running', 'Running (minAvailable 1), but not Ready');
  assert.deepEqual([made('job-nginx1'), made('job-nginx2'), made('job-nginx3')], [1, 0, 0]);

  await writeFile(join(dir, 'ready'), '');
  await nextProbe(clock, probes, 4, 2000);
  await until(() => made('job-nginx3') === 5, { describe: 'job-nginx2 then job-nginx3 start' });
  await writeFile(join(dir, 'done'), '');
  assert.equal((await ended('dep')).state, 'SUCCESS');
  assert.equal(backend.phaseOf('dep'), 'Completed');
});

test('a dependent task waits for an HTTP readiness probe: the port appears, then the path answers 200', async (t) => {
  const dir = await scratch(t);
  const clock = manualClock();
  const { backend, events, runtime } = await processBackend(t, undefined, clock);
  const port = await freePort();
  await mkdir(join(dir, 'www'));
  const server = shellTask(
    'server',
    1,
    `while [ ! -e ${dir}/listen ]; do sleep 0.1; done; exec python3 -m http.server ${port} --bind 127.0.0.1 --directory ${dir}/www`,
  );
  const c = server.template.spec.containers[0]!;
  c.ports = [{ name: 'http', containerPort: port }];
  c.readinessProbe = { httpGet: { path: '/ready.txt', port: 'http' }, periodSeconds: 5, failureThreshold: 1 };
  const client = shellTask('client', 1, 'sleep 60', { extra: { dependsOn: { name: ['server'] } } });
  await backend.submitVolcanoJob('web', vcjob('web', [server, client], { minAvailable: 1 }));
  const said = (pattern: RegExp) => events.some((e) => e.jobId === 'web' && pattern.test(e.status));
  const target = `httpGet :http/ready.txt`;

  await until(() => said(new RegExp(`readiness probe \\(${target}\\) once: .*ECONNREFUSED`)), {
    describe: 'the probe finds no port',
  });
  await writeFile(join(dir, 'listen'), '');
  await until(
    () =>
      new Promise<boolean>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => resolve(socket.destroy() !== undefined));
        socket.once('error', () => resolve(false));
      }),
    { describe: 'the server listens' },
  );
  await probesIdle(clock, 1, 5000);
  await clock.advance(5000);
  await until(() => said(/once: HTTP status 404; it is not Ready$/), {
    describe: 'the path is not there yet',
  });
  assert.equal([...runtime.pods.keys()].filter((n) => n.includes('client')).length, 0, 'the client waits');
  await writeFile(join(dir, 'www', 'ready.txt'), 'ok');
  await probesIdle(clock, 1, 5000);
  await clock.advance(5000);
  await until(() => [...runtime.pods.keys()].some((n) => n.includes('client')), {
    describe: 'the client starts once the server is Ready',
  });
});

test('a failed liveness probe restarts the container (restartPolicy OnFailure), saying why', async (t) => {
  const dir = await scratch(t);
  const clock = manualClock();
  const { backend, events } = await processBackend(t, undefined, clock);
  const task = shellTask('svc', 1, `echo >> ${dir}/starts; sleep 60`);
  task.template.spec.restartPolicy = 'OnFailure';
  const probes = join(dir, 'probes');
  task.template.spec.containers[0]!.livenessProbe = {
    exec: { command: counted(probes, `test ! -e ${dir}/sick`) },
    periodSeconds: 2,
    failureThreshold: 2,
    terminationGracePeriodSeconds: 1,
  };
  await backend.submitVolcanoJob('live', vcjob('live', [task]));
  await until(() => lines(join(dir, 'starts')) === 1, { describe: 'the container starts' });
  await until(() => lines(probes) === 1, { describe: 'the first liveness probe passes' });
  await writeFile(join(dir, 'sick'), '');
  await nextProbe(clock, probes, 1, 2000);
  await nextProbe(clock, probes, 2, 2000);
  await until(() => lines(join(dir, 'starts')) === 2, { describe: 'the container starts again' });
  assert.ok(
    events.some(
      (e) =>
        e.jobId === 'live' &&
        /^Rank 0: container svc failed its liveness probe \(exec sh -c .*\) 2 times in a row: exit code 1; it restarts \(restart 1\)$/.test(
          e.status,
        ),
    ),
    events.map((e) => e.status).join(' | '),
  );
  await rm(join(dir, 'sick'));
  assert.equal(backend.phaseOf('live'), 'Running');
});

test('a failed startup probe fails a restartPolicy Never pod, and readiness waits for startup', async (t) => {
  const clock = manualClock();
  const { backend, ended } = await processBackend(t, undefined, clock);
  const port = await freePort();
  const task = shellTask('app', 1, 'sleep 60');
  const c = task.template.spec.containers[0]!;
  c.startupProbe = { tcpSocket: { port }, periodSeconds: 3, failureThreshold: 2 };
  c.readinessProbe = { exec: { command: ['sh', '-c', 'exit 1'] }, periodSeconds: 3 };
  await backend.submitVolcanoJob('boot', vcjob('boot', [task]));
  // Two workers armed after their first runs: the startup probe's and the readiness probe's (idle until started).
  await until(() => backend.phaseOf('boot') === 'Running', { describe: 'the pod runs' });
  await probesIdle(clock, 2, 3000);
  await clock.advance(3000);
  const end = await ended('boot');
  assert.equal(end.state, 'FAILURE');
  assert.match(
    end.status,
    new RegExp(
      `^Rank 0: container app failed its startup probe \\(tcpSocket :${port}\\) 2 times in a row: .*ECONNREFUSED`,
    ),
  );
  assert.equal(backend.phaseOf('boot'), 'Failed');
});

test('a probe that does not answer within timeoutSeconds fails, and its command is killed (no late answer)', async (t) => {
  const dir = await scratch(t);
  const clock = manualClock();
  const { backend, events } = await processBackend(t, undefined, clock);
  const task = shellTask('slow', 1, 'sleep 60');
  task.template.spec.containers[0]!.readinessProbe = {
    exec: { command: counted(join(dir, 'probes'), `sleep 60; echo late >> ${dir}/late`) },
    timeoutSeconds: 2,
    failureThreshold: 1,
  };
  await backend.submitVolcanoJob('slow', vcjob('slow', [task]));
  // The first probe runs at once; its timeout is the one timer armed.
  await until(() => lines(join(dir, 'probes')) === 1 && clock.pending() === 1, {
    describe: 'the probe runs',
  });
  await clock.advance(2000);
  await until(
    () =>
      events.some(
        (e) =>
          e.jobId === 'slow' &&
          /failed its readiness probe \(exec .*\) once: no answer within its timeoutSeconds \(2 s\); it is not Ready$/.test(
            e.status,
          ),
      ),
    { describe: 'the timeout is told' },
  );
  assert.equal(clock.nextDue(), clock.now() + 8000, 'the next probe comes a period (10 s) after the first');
  await backend.cancel('slow');
  assert.equal(existsSync(join(dir, 'late')), false);
});

const plan = (container: Partial<Container>): PodPlan =>
  ({
    rank: 0,
    task: {
      name: 't',
      replicas: 1,
      template: { spec: { containers: [{ name: 'c', image: 'x', ...container }] } },
    },
  }) as unknown as PodPlan;

test('the prober’s decisions: defaults, thresholds, whole seconds of initial delay, startup first', () => {
  const { workers, containers } = podProbes(
    plan({
      startupProbe: { exec: { command: ['true'] }, failureThreshold: 2 },
      readinessProbe: { tcpSocket: { port: 1 }, initialDelaySeconds: 3, successThreshold: 2 },
    }),
  );
  const [startup, readiness] = workers as [ProbeWorker, ProbeWorker];
  assert.deepEqual(startup.timing, {
    initialDelaySeconds: 0,
    periodMs: 10_000,
    timeoutMs: 1000,
    successThreshold: 1,
    failureThreshold: 2,
  });
  const state = containers.get('c')!;
  assert.deepEqual(state, { started: false, ready: false });
  assert.equal(probesNow(readiness, state, 5000), false, 'readiness waits for startup');
  assert.equal(probesNow(startup, state, 0), true);
  const started = { started: true, ready: false };
  assert.equal(probesNow(startup, started, 0), false, 'a started container is not probed for startup');
  assert.equal(probesNow(readiness, started, 2999), false, 'the kubelet counts whole seconds');
  assert.equal(probesNow(readiness, started, 3000), true);
  const once = probeResult(startup, false);
  assert.deepEqual(once.verdict, { kind: 'none' });
  assert.deepEqual(probeResult(once.worker, false).verdict, { kind: 'kill' });
  assert.deepEqual(
    probeResult(probeResult(once.worker, true).worker, false).verdict,
    { kind: 'none' },
    'a success breaks the run',
  );
  assert.deepEqual(probeResult(startup, true).verdict, { kind: 'started' });
  const first = probeResult(readiness, true);
  assert.deepEqual(first.verdict, { kind: 'none' }, 'successThreshold 2');
  assert.deepEqual(probeResult(first.worker, true).verdict, { kind: 'ready', ready: true });
});
