import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { openTestBackend } from '../support/local-backend.ts';
import { needs } from '../support/local-tools.ts';
import { until } from '../support/until.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const tools = await needs('bwrap', 'nft', 'ip', 'pgrep');

/** Host processes whose whole command line is `pattern` (pgrep exits 1 when there is none). */
function hostProcesses(pattern: string): number[] {
  const found = spawnSync('pgrep', ['-xf', pattern], { encoding: 'utf8' }).stdout.trim();
  return found ? found.split('\n').map(Number) : [];
}

/**
 * The pid of the host process whose command line is `pattern`, once it runs. The bound allows a
 * loaded machine: a full run at load ~100 once took over 30 s to start the pod.
 */
function hostProcess(pattern: string): Promise<number> {
  return until(() => hostProcesses(pattern)[0], { describe: `a process ${pattern} runs`, timeout: 120_000 });
}

test(
  'a replica killed by SIGKILL from outside ends the job FAILURE, not SUCCESS with 137',
  tools,
  async (t) => {
    const { backend, ended } = await openTestBackend(t);
    await backend.submitVolcanoJob('victim', vcjob('victim', [shellTask('main', 1, 'exec sleep 301')]));
    process.kill(await hostProcess('sleep 301'), 'SIGKILL');
    const end = await ended('victim');
    assert.equal(end.state, 'FAILURE');
    assert.equal(end.status, 'Rank 0 was killed by SIGKILL from outside the job');
    assert.deepEqual(end.exitCodes, { 0: 137 });
  },
);

test(
  'a replica whose supervisor is killed ends the job FAILURE naming the lost supervisor',
  tools,
  async (t) => {
    const { home, backend, ended } = await openTestBackend(t);
    await backend.submitVolcanoJob('orphan', vcjob('orphan', [shellTask('main', 1, 'exec sleep 302')]));
    await hostProcess('sleep 302');
    const pods = join(home, 'local', 'runtime', 'pods');
    const [pod] = (await readdir(pods)).filter((p) => p.startsWith('orphan'));
    const supervisor = Number(await readFile(join(pods, pod!, 'containers', 'main', 'pid'), 'utf8'));
    process.kill(supervisor, 'SIGKILL');
    const end = await ended('orphan');
    assert.equal(end.state, 'FAILURE');
    assert.equal(end.status, 'ucompute lost the supervisor of rank 0');
    assert.deepEqual(hostProcesses('sleep 302'), [], 'the container ended with its supervisor');
  },
);
