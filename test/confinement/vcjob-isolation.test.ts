import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { chmod, mkdtemp, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { detectCgroups } from '../../src/backends/local/cgroups.ts';
import { run } from '../../src/backends/local/exec.ts';
import { folderTag } from '../../src/backends/local/host-names.ts';
import { removeBridgeNetwork } from '../../src/backends/local/network.ts';
import { openLocalBackend } from '../../src/backends/local/open.ts';
import type { BackendEvent } from '../../src/jobs/backend.ts';
import { assertExit, BIN, CHILD_ENV, runCli } from '../support/cli.ts';
import { sharedHostView } from '../support/host-view.ts';
import { needs } from '../support/local-tools.ts';
import { until } from '../support/until.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

/**
 * `vcjob run` beside a running ucompute (issue 9 item 6): its own state, namespaces and bridge, a
 * lock on the state folder, nothing left behind, also after SIGINT; and a RestartJob that
 * recreates pods while others start never crashes on a busy cgroup. Containers sleep at most a
 * minute, so that even an aborted run of this file leaves nothing for long.
 */

const tools = await needs('bwrap', 'nft', 'ip');
const tag = process.pid.toString(36).slice(-4) + Math.random().toString(36).slice(2, 4);

/** A server-like local backend on its own test bridge, in a data folder of its own. */
async function server(t: { after(fn: () => Promise<void>): void }, name: string) {
  const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-server-'));
  const network = {
    bridge: `ut${name}${tag}`.slice(0, 9),
    subnet: `10.${200 + (process.pid % 50)}.${Math.floor(Math.random() * 256)}.0/24`,
    poolSize: 2,
  };
  // The test process's copy of /etc, not one per server (see ../support/host-view.ts).
  await sharedHostView(join(dataDir, 'local', 'runtime'));
  const backend = await openLocalBackend({
    config: { gracePeriodMs: 200, network },
    dataDir,
    storageRoot: join(dataDir, 'storage'),
    storageClaim: 'ucompute-storage',
    embedded: true,
  });
  const events: BackendEvent[] = [];
  backend.onEvent((e) => void events.push(e));
  t.after(async () => {
    for (const id of await backend.knownJobs()) await backend.cancel(id);
    await backend.close();
    await removeBridgeNetwork(network.bridge);
    await rm(dataDir, { recursive: true, force: true });
  });
  const reached = (id: string, states: string[], ms = 30_000) =>
    until(() => events.find((e) => e.jobId === id && states.includes(e.state)), {
      describe: `job ${id} reaches ${states.join(' or ')}`,
      timeout: ms,
    });
  return { backend, dataDir, network, reached, events };
}

const namespaces = async (prefix: string) =>
  (await run('ip', ['netns', 'list']))
    .split('\n')
    .filter((l) => l.startsWith(prefix))
    .map((l) => l.split(' ')[0]!);
/**
 * A `vcjob run`'s own temporary folder (its TMPDIR): the state folder the run makes there, watched
 * from its creation on, and the bridge that folder's names derive (`uc` and the folder's tag; see
 * host-names.ts), so that this file looks at its own runs' folders and links only, never at the
 * other runs and servers of the machine.
 */
async function runScope(t: { after(fn: () => Promise<void>): void }) {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'ucompute-vcjob-tmp-')));
  // Containers' unprivileged host users pass through it to the state folder, as through /tmp.
  await chmod(dir, 0o711);
  const made: string[] = [];
  const watcher = watch(dir, (_event, name) => {
    if (name?.startsWith('ucompute-vcjob-state-') && !made.includes(name)) made.push(name);
  });
  t.after(async () => {
    watcher.close();
    await rm(dir, { recursive: true, force: true });
  });
  const bridges = async () => {
    assert.equal(made.length, 1, `the run made one state folder in ${dir}: ${made.join(', ')}`);
    // The runtime's names derive from its folder in the state folder: the first name, or one of
    // the next tries when that was taken.
    const runtime = join(dir, made[0]!, 'runtime');
    const candidates = [0, 1, 2, 3].map((attempt) => `uc${folderTag(runtime, attempt)}`);
    return (await readdir('/sys/class/net')).filter((l) => candidates.includes(l));
  };
  return {
    env: { ...CHILD_ENV, TMPDIR: dir },
    /** Asserts that the running run has its bridge (so that its absence later says something). */
    async assertBridgeUp() {
      assert.equal((await bridges()).length, 1, 'the running run has a bridge of its own');
    },
    /** Asserts that the run made one state folder here and left neither it nor its bridge. */
    async assertNothingLeft() {
      assert.deepEqual(await bridges(), [], 'the run removed its bridge');
      assert.deepEqual(await readdir(dir), [], 'the run removed its state folder');
    },
  };
}

const manifest = (name: string, script: string) =>
  `apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: { name: ${name} }\nspec:\n  tasks:\n    - name: t\n      replicas: 1\n      template: { spec: { restartPolicy: Never, containers: [{ name: c, image: debian, command: [sh, -c, ${JSON.stringify(script)}] }] } }\n`;

test(
  'a second process on the same state folder is refused, naming the folder; the lock goes with the first',
  tools,
  async (t) => {
    const first = await server(t, 'l');
    const second = await openLocalBackend({
      config: { network: first.network },
      dataDir: first.dataDir,
      storageRoot: join(first.dataDir, 'storage'),
      storageClaim: 'ucompute-storage',
      embedded: true,
    }).then(
      async (opened) => {
        await opened.close();
        return null;
      },
      (error: Error) => error,
    );
    assert.match(
      String(second?.message),
      /the local state folder .*\/local is in use by another ucompute process/,
    );
    await first.backend.close();
    const again = await openLocalBackend({
      config: { network: first.network },
      dataDir: first.dataDir,
      storageRoot: join(first.dataDir, 'storage'),
      storageClaim: 'ucompute-storage',
      embedded: true,
    });
    await again.close();
  },
);

test(
  "vcjob run beside a server on its data folder leaves the server's namespaces and jobs alone and nothing behind",
  tools,
  async (t) => {
    const s = await server(t, 'v');
    await s.backend.submitVolcanoJob(`long-${tag}`, vcjob('long', [shellTask('t', 1, 'sleep 60')]));
    await s.reached(`long-${tag}`, ['RUNNING']);
    const serverNamespaces = await namespaces(`${s.network.bridge}-`);
    assert.ok(serverNamespaces.length > 0, 'the server holds namespaces (its pod and its pool)');
    const scope = await runScope(t);

    const file = join(s.dataDir, 'quick.yaml');
    await writeFile(file, manifest('quick', 'echo quick run'));
    // The configuration even names the server's bridge: the run takes a bridge of its own anyway.
    const config = join(s.dataDir, 'config.json');
    await writeFile(config, JSON.stringify({ local: { network: s.network, hostUserland: true } }));
    const result = await runCli(['vcjob', 'run', file, '--data-dir', s.dataDir, '--config', config], {
      env: scope.env,
    });
    assertExit(result, 0);
    assert.match(result.stdout, /^\[0\] quick run$/m);

    assert.deepEqual(
      (await namespaces(`${s.network.bridge}-`)).filter((n) => serverNamespaces.includes(n)).sort(),
      serverNamespaces.sort(),
      "every namespace of the server's is still there",
    );
    assert.ok(
      !s.events.some((e) => e.jobId === `long-${tag}` && e.state !== 'RUNNING' && e.state !== 'IN_QUEUE'),
    );
    await scope.assertNothingLeft();

    // The server still starts jobs: its pool and bridge work.
    await s.backend.submitVolcanoJob(`after-${tag}`, vcjob('after', [shellTask('t', 1, 'true')]));
    const end = await s.reached(`after-${tag}`, ['SUCCESS', 'FAILURE']);
    assert.equal(end.state, 'SUCCESS', end.status);
  },
);

test('SIGINT ends the running job, its pods and the run; nothing is left running', tools, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-sigint-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const marker = `ucompute-sigint-${tag}`;
  const file = join(dataDir, 'sleepy.yaml');
  await writeFile(file, manifest('sleepy', `echo started; sleep 60; : ${marker}`));
  const scope = await runScope(t);

  const child = spawn(process.execPath, [BIN, 'vcjob', 'run', file, '--data-dir', dataDir, '--follow'], {
    env: scope.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await until(
    () => {
      if (!stdout.includes('started')) throw new Error(`stderr: ${stderr}`);
      return true;
    },
    { describe: 'the job runs', timeout: 60_000 },
  );
  const running = async () => (await run('pgrep', ['-f', marker]).catch(() => '')).trim();
  assert.notEqual(await running(), '', 'the container process runs');
  await scope.assertBridgeUp();

  child.kill('SIGINT');
  const code = await Promise.race([exited, sleep(30_000).then(() => 'timeout')]);
  assert.equal(code, 1, `exit code; stderr: ${stderr}`);
  assert.match(stderr, /phase (Aborted|Terminated|Failed)/);
  assert.equal(await running(), '', 'no container process is left');
  await scope.assertNothingLeft();
});

test(
  'RestartJob while other pods start their containers recreates them without a cgroup EBUSY crash',
  tools,
  async (t) => {
    const s = await server(t, 'r');
    const id = `restart-${tag}`;
    // Init containers of different lengths keep main containers starting while the policy fires.
    const starting = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => {
      const task = shellTask(`busy${i}`, 1, 'sleep 60');
      task.template.spec!.initContainers = [
        { name: 'init', image: 'debian', command: ['sh', '-c', `sleep 0.0${i}`] },
      ];
      return task;
    });
    const failing = shellTask('fail', 1, 'exit 3', {
      extra: { policies: [{ event: 'PodFailed', action: 'RestartJob' }] },
    });
    await s.backend.submitVolcanoJob(id, vcjob('restart', [...starting, failing], { maxRetry: 100 }));
    const restarts = () => s.events.filter((e) => e.jobId === id && /restarting/.test(e.status)).length;
    await until(() => restarts() >= 3, { describe: 'the job restarts three times', timeout: 120_000 });
    // And a cancel while pods start again.
    await s.backend.cancel(id);
    const end = await s.reached(id, ['SUCCESS', 'FAILURE'], 60_000);
    assert.match(end.status, /Terminated/);
    for (const h of (await detectCgroups()).hierarchies) {
      const left = await readdir(join(h.root, 'ucompute')).catch(() => [] as string[]);
      assert.deepEqual(
        left.filter((d) => d.startsWith(id)),
        [],
        `no cgroup of the job is left in ${h.root}`,
      );
    }
  },
);
