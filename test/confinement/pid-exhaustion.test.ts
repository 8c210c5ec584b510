import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { PodRecord } from '../../src/backends/local/pod/context.ts';
import {
  container,
  errors,
  missingPrerequisite,
  output,
  outputDir,
  testRuntime,
} from '../support/local-runtime.ts';

/** The pids cgroup folder of a pod, from its record in the state folder. */
async function pidsCgroup(stateDir: string, pod: string): Promise<string> {
  const record = JSON.parse(await readFile(join(stateDir, 'pods', pod, 'pod.json'), 'utf8')) as PodRecord;
  const dir =
    record.cgroups.find((d) => d.includes('/pids/')) ?? record.cgroups.find((d) => !d.includes('/memory/'));
  assert.ok(dir, 'the pod has a cgroup with the pids controller');
  return dir;
}

const skip = await missingPrerequisite();

describe('process limits', { skip: skip ?? false }, () => {
  test('a pod gets 4,096 processes at most unless configured otherwise', async (t) => {
    const { pod, stateDir } = await testRuntime(t);
    const p = await pod('pids-default');
    assert.equal(
      (await readFile(join(await pidsCgroup(stateDir, p.name), 'pids.max'), 'utf8')).trim(),
      '4096',
    );
  });

  test('a loop starting 5,000 processes stops at the limit, and the host keeps working', async (t) => {
    const { pod, stateDir } = await testRuntime(t, { defaultPids: 64 });
    const out = await outputDir(t);
    const p = await pod('pids-bomb');
    const cgroup = await pidsCgroup(stateDir, p.name);
    // Bounded: 5,000 short sleeps at most. The shell gives up at the first fork the kernel refuses.
    const bomb = container(out, 'bomb', [
      'sh',
      '-c',
      'n=0; while [ $n -lt 5000 ]; do sleep 5 & n=$((n+1)); echo $n; done',
    ]);
    const exit = await (await p.start(bomb)).exited;
    const started = Number((await output(bomb)).trim().split('\n').at(-1));
    assert.ok(started < 64, `the loop started ${started} processes, fewer than the pod's limit of 64`);
    assert.notEqual(exit.exitCode, 0);
    assert.match(await errors(bomb), /Cannot fork/);
    assert.ok(Number(/max (\d+)/.exec(await readFile(join(cgroup, 'pids.events'), 'utf8'))?.[1]) > 0);
    assert.equal(execFileSync('sh', ['-c', 'echo host works'], { encoding: 'utf8' }), 'host works\n');
  });
});
