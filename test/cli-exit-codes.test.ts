import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import { assertExit, CHILD_ENV, runCli, runCliHere } from './support/cli.ts';
import { needs } from './support/local-tools.ts';
import { ROOT } from './support/paths.ts';
import { type Served, servedJobInState, startServe, stopServe } from './support/serve.ts';

/**
 * An application's exit code on the local backend, through the CLI: the job stays SUCCESS (the
 * platform ran it to its end), `jobs` and `show` say which rank exited non-zero, and `run
 * --wait/--follow` exit with the application's code, as `srun` does. A job the platform ended
 * (cancelled, expired, failed, never started) says so, and the commands exit with its outcome's code.
 * The commands run the CLI's main() in this process, whose answer bin/ucompute.js makes the
 * process's exit code; the first test runs the real process, that this holds.
 */

const TIMEOUT = { timeout: 600_000 };
const prerequisites = await needs('bwrap', 'nft', 'ip', 'nsenter', 'setpriv');
const { UCOMPUTE_URL: _url, UCOMPUTE_TOKEN: _token, UCOMPUTE_DATA_DIR: _dataDir, ...childEnv } = CHILD_ENV;

// Passable by others: the sandbox reaches the data folder as containers' unprivileged host users.
const tmp = mkdtempSync(join(tmpdir(), 'ucompute-exit-'));
chmodSync(tmp, 0o711);
// Its own bridge and subnet, so that it meets no other runtime on this machine.
const tag = process.pid.toString(36).slice(-4) + Math.random().toString(36).slice(2, 5);
const bridge = `ux${tag}`.slice(0, 9);
const subnet = `10.${200 + (process.pid % 50)}.${Math.floor(Math.random() * 256)}.0/24`;
let server: Served | undefined;

const EXITS_APP = `application: v1
name: exits
version: "1.0"
title: Exits with a code
authors: [tests]
description: Prints a line, then exits with the code it is given.
tool: { name: debian, version: "12" }
invocation: [sh, -c, 'echo "exiting with $1"; exit "$1"', sh, { type: var, vars: code }]
parameters:
  code: { type: integer, title: Exit code }
---
application: v1
name: sleeps
version: "1.0"
title: Sleeps
authors: [tests]
description: Sleeps for a minute.
tool: { name: debian, version: "12" }
invocation: [sleep, "60"]
---
application: v1
name: fills
version: "1.0"
title: Fills its folder
authors: [tests]
description: Writes more than its folder may hold, then waits.
tool: { name: debian, version: "12" }
invocation: [sh, -c, 'head -c 4000000 /dev/zero > /work/fill; sleep 60']
---
application: v1
name: root
version: "1.0"
title: Runs as root
authors: [tests]
description: Says which user it runs as.
tool: { name: debian, version: "12" }
container: { runAsRoot: true }
invocation: [sh, -c, 'echo "uid $(id -u)"']
`;

/** Per vCPU-minute prices that come out whole per second: 60 credits a minute is one a second. */
const PRODUCTS = `products:
  - { id: u1-standard-1, category: u1-standard, cpu: 1, memoryInGigs: 2, pricePerUnit: 60 }
  - { id: u1-standard-2, category: u1-standard, cpu: 2, memoryInGigs: 4, pricePerUnit: 60 }
`;

before(async () => {
  if (prerequisites.skip) return;
  const apps = join(tmp, 'apps');
  mkdirSync(apps);
  writeFileSync(join(apps, 'exits.yml'), EXITS_APP);
  const products = join(tmp, 'products.yml');
  writeFileSync(products, PRODUCTS);
  server = await startServe(mkdtempSync(join(tmp, 'data-')), {
    env: childEnv,
    args: ['--backend', 'local', '--apps', join(ROOT, 'examples', 'apps'), '--apps', apps],
    // The debian tool runs on the host's userland: a configuration turns that on explicitly.
    // Two vCPUs: a job on u1-standard-2 keeps the next one queued. Job folders hold 1 MB. Jobs
    // are charged every second (a credit per vCPU-second), so one runs out of credits in seconds.
    config:
      `products: ${products}\naccounting: { chargePeriodMs: 1000 }\n` +
      'monitorIntervalMs: 200\nlocal:\n  hostUserland: true\n  capacity: { cpu: 2 }\n' +
      '  diskLimitBytes: 1000000\n  diskCheckIntervalMs: 200\n' +
      `  network: { bridge: ${bridge}, subnet: ${subnet}, poolSize: 2 }\n`,
  });
});

after(async () => {
  await stopServe(server);
  if (!prerequisites.skip) {
    // The pods' network namespaces the service kept ready, then the bridge itself.
    for (const line of execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).split('\n')) {
      const name = line.split(' ')[0];
      if (name?.startsWith(`${bridge}-`)) execFileSync('ip', ['netns', 'del', name]);
    }
    await removeBridgeNetwork(bridge);
  }
  rmSync(tmp, { recursive: true, force: true });
});

const on = () => ['--url', server!.url, '--data-dir', server!.dataDir];
const cli = (args: string[]) => runCliHere([...args, ...on()], { env: childEnv });

describe('exit codes', { ...TIMEOUT, ...prerequisites }, () => {
  test('run --follow exits with the application code; jobs and show say SUCCESS (exit 3 on rank 0)', async () => {
    const followed = await runCli(['run', 'exits', '--param', 'code=3', '--follow', ...on()], {
      env: childEnv,
    });
    assertExit(followed, 3);
    const id = followed.stdout.split('\n')[0]!;
    assert.match(followed.stdout, /^exiting with 3$/m);
    assert.match(followed.stderr, new RegExp(`^${id}: SUCCESS, completed \\(exit 3 on rank 0\\)$`, 'm'));

    const jobs = await cli(['jobs']);
    assertExit(jobs, 0);
    assert.match(
      jobs.stdout,
      new RegExp(`^${id}\\s+exits@1\\.0\\s+SUCCESS, completed \\(exit 3 on rank 0\\)\\s`, 'm'),
    );
    const show = await cli(['show', id]);
    assertExit(show, 0);
    assert.match(show.stdout, /^state\s+SUCCESS$/m);
    assert.match(show.stdout, /^outcome\s+completed \(exit 3 on rank 0\)$/m);
    assert.match(show.stdout, /^exit codes\s+rank 0: 3$/m);
  });

  test('run --wait of a clean run exits 0 and shows a plain SUCCESS', async () => {
    const waited = await cli(['run', 'exits', '--param', 'code=0', '--wait']);
    assertExit(waited, 0);
    const [id, final] = waited.stdout.trim().split('\n');
    assert.equal(final!, `${id}: SUCCESS, completed (exit 0)`);
    const show = await cli(['show', id!]);
    assert.match(show.stdout, /^state\s+SUCCESS$/m);
    assert.match(show.stdout, /^outcome\s+completed \(exit 0\)$/m);
  });

  test('run --wait exits with the code too, and logs -f of the ended job agrees', async () => {
    const waited = await cli(['run', 'exits', '--param', 'code=42', '--wait']);
    assertExit(waited, 42);
    const id = waited.stdout.split('\n')[0]!;
    const logs = await cli(['logs', id, '-f']);
    assertExit(logs, 42);
    assert.match(logs.stdout, /^exiting with 42$/m);
  });

  test('a cancelled job: logs -f exits 130, and jobs --outcome cancelled lists it', async () => {
    const id = await submitted(['sleeps']);
    await servedJobInState(server!, id, 'RUNNING');
    const following = cli(['logs', id, '-f']);
    assertExit(await cli(['cancel', id]), 0);
    const logs = await following;
    assertExit(logs, 130);
    assert.match(logs.stderr, new RegExp(`^${id}: SUCCESS, cancelled by local$`, 'm'));
    const cancelled = await cli(['jobs', '--outcome', 'cancelled']);
    assert.match(
      cancelled.stdout,
      new RegExp(`^${id}\\s+sleeps@1\\.0\\s+SUCCESS, cancelled by local\\s`, 'm'),
    );
    assert.doesNotMatch((await cli(['jobs', '--outcome', 'completed'])).stdout, new RegExp(id));
  });

  test('an expired job: run --wait exits 124', async () => {
    const waited = await cli(['run', 'sleeps', '--time', '2s', '--wait']);
    assertExit(waited, 124);
    assert.match(waited.stdout, /: EXPIRED, expired: its time allocation ran out$/m);
  });

  test('a job the platform failed: run --follow exits 125 with the reason', async () => {
    const followed = await cli(['run', 'fills', '--follow']);
    assertExit(followed, 125);
    assert.match(
      followed.stderr,
      /: FAILURE, failed \(The job used .* of its 976.6 KiB disk limit in its job folder\)$/m,
    );
  });

  test('a queued job that is cancelled never started: logs -f exits 123', async () => {
    const blocker = await submitted(['sleeps', '--product', 'u1-standard-2']);
    await servedJobInState(server!, blocker, 'RUNNING');
    const queued = await submitted(['sleeps']);
    const following = cli(['logs', queued, '-f']);
    assertExit(await cli(['cancel', queued]), 0);
    const logs = await following;
    assertExit(logs, 123);
    assert.match(
      logs.stderr,
      new RegExp(`^${queued}: SUCCESS, never started \\(cancelled by local\\)$`, 'm'),
    );
    assertExit(await cli(['cancel', blocker]), 0);
  });

  test('a job stopped for lack of credits: run --wait exits 122, its balance ends at 0', async () => {
    // Three credits, a credit a second, each charge held back one second ahead: out in about 3 s.
    assertExit(await cli(['admin', 'user', 'penny']), 0);
    const granted = await cli([
      'admin',
      'grant',
      '--user',
      'penny',
      '--category',
      'u1-standard',
      '--credits',
      '3',
    ]);
    assertExit(granted, 0);
    const token = await cli(['admin', 'token', 'penny']);
    assertExit(token, 0);
    const asPenny = (args: string[]) =>
      runCliHere([...args, '--url', server!.url, '--token', token.stdout.trim()], { env: childEnv });
    const waited = await asPenny(['run', 'sleeps', '--wait']);
    assertExit(waited, 122);
    const id = waited.stdout.split('\n')[0]!;
    assert.match(waited.stdout, new RegExp(`^${id}: SUCCESS, stopped: out of credits$`, 'm'));
    const logs = await asPenny(['logs', id, '-f']);
    assertExit(logs, 122);
    const listed = await asPenny(['jobs', '--outcome', 'out-of-credits']);
    assert.match(
      listed.stdout,
      new RegExp(`^${id}\\s+sleeps@1\\.0\\s+SUCCESS, stopped: out of credits\\s`, 'm'),
    );
    const job = JSON.parse((await asPenny(['show', id, '--json'])).stdout) as {
      billing: { creditsCharged: number };
    };
    assert.equal(job.billing.creditsCharged, 3, 'what it had, never more');
  });

  test('a runAsRoot app runs under a configuration file that says nothing of root: root in its user namespace', async () => {
    const waited = await cli(['run', 'root', '--wait']);
    assertExit(waited, 0);
    const id = waited.stdout.split('\n')[0]!;
    const logs = await cli(['logs', id]);
    assert.match(logs.stdout, /^uid 0$/m);
  });
});

/** Submits `run` with these arguments and answers the job's id. */
async function submitted(args: string[]): Promise<string> {
  const run = await cli(['run', ...args]);
  assertExit(run, 0);
  return run.stdout.trim();
}
