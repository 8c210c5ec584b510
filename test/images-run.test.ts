import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import { openLocalBackend } from '../src/backends/local/open.ts';
import type { BackendEvent } from '../src/jobs/backend.ts';
import type { Container } from '../src/volcano/api/types.ts';
import { assertExit, runCli } from './support/cli.ts';
import { sharedHostView } from './support/host-view.ts';
import { busyboxArchive } from './support/images.ts';
import { needs } from './support/local-tools.ts';
import { testNetwork } from './support/test-network.ts';
import { until } from './support/until.ts';
import { vcjob } from './support/vcjob.ts';

/** Images from the store run on the local backend's real runtime with their own config. */

const tools = await needs('bwrap', 'nft', 'ip', 'skopeo', 'umoci', 'busybox');

/** The local backend on a data folder of its own, with its own bridge (and a subnet it derives). */
async function open(t: { after(fn: () => Promise<void>): void }, hostUserland: boolean) {
  const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-images-run-'));
  const { bridge } = testNetwork();
  // The test process's copy of /etc, not one per backend (see ./support/host-view.ts).
  await sharedHostView(join(dataDir, 'local', 'runtime'));
  const backend = await openLocalBackend({
    config: {
      gracePeriodMs: 200,
      hostUserland,
      network: {
        bridge,
        poolSize: 0,
      },
    },
    dataDir,
    storageRoot: join(dataDir, 'storage'),
    storageClaim: 'ucompute-storage',
    embedded: false,
  });
  const events: BackendEvent[] = [];
  backend.onEvent((e) => void events.push(e));
  t.after(async () => {
    for (const id of await backend.knownJobs()) await backend.cancel(id);
    await backend.close();
    await removeBridgeNetwork(bridge);
    await rm(dataDir, { recursive: true, force: true });
  });
  const final = (id: string) =>
    events.find((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  /** Runs a one-container job to its end: its last event, its updates and its output. */
  const runJob = async (id: string, container: Container) => {
    await backend.submitVolcanoJob(
      id,
      vcjob(id, [
        { name: 't', replicas: 1, template: { spec: { restartPolicy: 'Never', containers: [container] } } },
      ]),
    );
    const end = await until(() => final(id), { describe: `job ${id} ends`, timeout: 20_000 });
    let stdout = '';
    for await (const chunk of backend.logs(id, { follow: false })) stdout += chunk.stdout ?? '';
    return { end, updates: events.filter((e) => e.jobId === id).map((e) => e.status), stdout };
  };
  return { dataDir, runJob };
}

test(
  'an image imported from a busybox-static tarball runs its entrypoint with its own Env and WorkingDir',
  tools,
  async (t) => {
    const { dataDir, runJob } = await open(t, false);
    const build = await mkdtemp(join(tmpdir(), 'ucompute-busybox-'));
    t.after(() => rm(build, { recursive: true, force: true }));
    const archive = await busyboxArchive(build, {
      name: 'lab/busybox:1',
      env: ['GREETING=hello from the image', 'WHO=image'],
      entrypoint: ['/bin/sh', '-c'],
      cmd: ['echo "$GREETING, $WHO"; pwd; id -u'],
      workingDir: '/srv/app',
    });
    assertExit(await runCli(['images', 'import', archive, '--data-dir', dataDir]), 0);
    const limits = { resources: { limits: { cpu: '100m', memory: '64Mi' } } };

    const own = await runJob('own', {
      name: 'c',
      image: 'lab/busybox:1',
      ...limits,
      env: [{ name: 'WHO', value: 'container' }],
    });
    assert.equal(own.end.state, 'SUCCESS', own.end.status);
    assert.equal(
      own.stdout,
      'hello from the image, container\n/srv/app\n0\n',
      'container env overrides image env',
    );
    assert.ok(
      !own.updates.some((u) => u.includes('userland view')),
      'an image from the store needs no fallback',
    );

    const args = await runJob('args', {
      name: 'c',
      image: 'lab/busybox:1',
      ...limits,
      args: ['echo "args: $GREETING"'],
    });
    assert.equal(
      args.stdout,
      'args: hello from the image\n',
      'args replace the image Cmd, after its Entrypoint',
    );

    const command = await runJob('command', {
      name: 'c',
      image: 'docker.io/lab/busybox:1',
      ...limits,
      command: ['/bin/busybox', 'sh', '-c', 'pwd; echo "$WHO"'],
      workingDir: '/tmp',
    });
    assert.equal(command.stdout, '/tmp\nimage\n', 'command replaces the entrypoint; workingDir wins');
  },
);

test(
  'an image missing from the store fails the job with a reason naming it, where the host view is off',
  tools,
  async (t) => {
    const { runJob } = await open(t, false);
    const missing = await runJob('missing', { name: 'c', image: 'ubuntu:22.04', command: ['true'] });
    assert.equal(missing.end.state, 'FAILURE');
    assert.match(
      missing.end.status,
      /image ubuntu:22\.04 is not in the local image store \(and local\.hostUserland is off\): add it with `ucompute images import FILE --name ubuntu:22\.04`/,
    );
  },
);

test(
  "where allowed, an image missing from the store runs on the host's userland view, said in the job's updates",
  tools,
  async (t) => {
    const { runJob } = await open(t, true);
    const fallback = await runJob('fallback', {
      name: 'c',
      image: 'ubuntu:22.04',
      command: ['sh', '-c', 'echo ran'],
    });
    assert.equal(fallback.end.state, 'SUCCESS', fallback.end.status);
    assert.equal(fallback.stdout, 'ran\n');
    assert.ok(
      fallback.updates.includes(
        "Image ubuntu:22.04 is not in the local image store; running on the host's userland view",
      ),
      fallback.updates.join('\n'),
    );
    const nothing = await runJob('nothing', { name: 'c', image: 'ubuntu:22.04' });
    assert.equal(nothing.end.state, 'FAILURE');
    assert.match(
      nothing.end.status,
      /spec\.containers\[0\]\.command: image ubuntu:22\.04 has no entrypoint here .*; give a command/,
    );
    // Kubernetes gives args to the image's entrypoint; the host view has none, so they are refused.
    const onlyArgs = await runJob('only-args', { name: 'c', image: 'ubuntu:22.04', args: ['echo', 'ran'] });
    assert.equal(onlyArgs.end.state, 'FAILURE');
    assert.match(
      onlyArgs.end.status,
      /spec\.containers\[0\]\.command: image ubuntu:22\.04 runs on the host's userland view, which has no entrypoint to give args to; give the command \(args alone would run "echo" as one\)/,
    );
  },
);

test(
  'with a configuration file, the host view is off unless it says hostUserland: true',
  tools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-images-config-'));
    await chmod(dir, 0o711); // containers' host users pass through to the data folder
    const { bridge } = testNetwork();
    t.after(async () => {
      await removeBridgeNetwork(bridge);
      await rm(dir, { recursive: true, force: true });
    });
    const config = join(dir, 'ucompute.yml');
    await writeFile(config, `local: { network: { bridge: ${bridge}, poolSize: 0 } }\n`);
    const manifest = join(dir, 'job.yaml');
    await writeFile(
      manifest,
      'apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: { name: missing }\nspec:\n  tasks:\n    - name: t\n      replicas: 1\n      template: { spec: { restartPolicy: Never, containers: [{ name: c, image: "ubuntu:22.04", command: [sh, -c, "echo ran"] }] } }\n',
    );
    const refused = await runCli([
      'vcjob',
      'run',
      manifest,
      '--config',
      config,
      '--data-dir',
      join(dir, 'data'),
    ]);
    assertExit(refused, 1);
    assert.match(
      refused.stderr,
      /image ubuntu:22\.04 is not in the local image store \(and local\.hostUserland is off\)/,
    );
  },
);
