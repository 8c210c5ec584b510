import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { collisions, type HostNames } from '../src/backends/local/host-names.ts';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import { assertExit, runCliHere } from './support/cli.ts';
import { needs } from './support/local-tools.ts';
import { type Served, spawnServe, startServe, stopServe } from './support/serve.ts';

/**
 * Two `ucompute serve` on one host, each on the names its data folder derives (nothing configured):
 * they run jobs at the same time without touching each other's pods, and a third configured onto
 * the first one's bridge refuses to start, naming the first one's data folder.
 */

const tools = await needs('bwrap', 'nft', 'ip', 'mpiexec', 'sshd');

const namesOf = async (dataDir: string): Promise<HostNames> =>
  JSON.parse(await readFile(join(dataDir, 'local', 'runtime', 'host-names.json'), 'utf8'));

test(
  "two instances on one host run jobs at once; a third on the first one's bridge is refused",
  tools,
  async (t) => {
    const dirs = await Promise.all(
      ['a', 'b', 'c'].map((n) => mkdtemp(join(tmpdir(), `ucompute-instance-${n}-`))),
    );
    const [dirA, dirB, dirC] = dirs as [string, string, string];
    const served: Served[] = [];
    const bridges: string[] = [];
    /** Jobs that would outlive their server (pods survive a restart), cancelled before it stops. */
    const running: { on: Served; id: string }[] = [];
    t.after(async () => {
      for (const { on: s, id } of running)
        await runCliHere(['cancel', id, '--url', s.url, '--data-dir', s.dataDir]);
      for (const s of served) await stopServe(s);
      for (const bridge of bridges) await removeBridgeNetwork(bridge);
      for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    });
    const serve = async (dataDir: string) => {
      // Room for the terminal and an MPI job beside it, whatever this machine has; a first start
      // sets up the bridge and compiles the seccomp filter, slow on a busy machine.
      const config =
        'security: { allowRootApps: true }\nlocal:\n  hostUserland: true\n  capacity: { cpu: 8, memoryInGigs: 16 }\n';
      const s = await startServe(dataDir, { args: ['--backend', 'local'], config });
      served.push(s);
      bridges.push((await namesOf(dataDir)).bridge);
      return s;
    };
    const on = (s: Served) => ['--url', s.url, '--data-dir', s.dataDir];
    const mpiHello = (s: Served) =>
      runCliHere(['run', 'mpi-hello', '--replicas', '2', '--time', '10m', '--wait', ...on(s)]);

    const a = await serve(dirA);
    // A job of the first instance runs while the second starts (which once removed its namespaces).
    const terminal = (await runCliHere(['run', 'terminal', '--time', '10m', ...on(a)])).stdout.trim();
    running.push({ on: a, id: terminal });
    const b = await serve(dirB);
    const [namesA, namesB] = [await namesOf(dirA), await namesOf(dirB)];
    assert.deepEqual(collisions(namesA, { ...namesB, dataDir: dirB, stateDir: '' }), []);

    const [onA, onB] = await Promise.all([mpiHello(a), mpiHello(b)]);
    assertExit(onA, 0);
    assertExit(onB, 0);
    const shown = await runCliHere(['show', terminal, '--json', ...on(a)]);
    assert.equal(JSON.parse(shown.stdout).status.state, 'RUNNING', shown.stdout);

    // Configured onto the first instance's bridge: refused before anything is set up.
    await writeFile(join(dirC, 'config.yml'), `local:\n  network:\n    bridge: ${namesA.bridge}\n`);
    const child = spawnServe([
      '--backend',
      'local',
      '--data-dir',
      dirC,
      '--config',
      join(dirC, 'config.yml'),
    ]);
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.notEqual(code, 0);
    assert.match(
      stderr,
      new RegExp(`bridge ${namesA.bridge} .* the ucompute instance whose data folder is ${dirA}`),
    );
  },
);
