import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { openTestBackend } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** Suspend on the local backend with its real runtime: the pods go, the job does not end. */

const tools = await needs('bwrap', 'nft', 'ip');

// Bounded: it once hung ~57 min at a load of 50 (cause not found); a hang must fail, not block a suite.
test('suspend stops the pods without ending the job; the same job runs again when submitted', {
  ...tools,
  timeout: 300_000,
}, async (t) => {
  const { backend, events } = await openTestBackend(t);
  const runningSince = (from: number) =>
    until(() => events.slice(from).some((e) => e.jobId === 'napper' && e.state === 'RUNNING'), {
      describe: 'napper runs',
    });
  const sleeping = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes('sleep 577');
  const job = vcjob('napper', [shellTask('t', 2, 'sleep 577')]);

  await backend.submitVolcanoJob('napper', job);
  await runningSince(0);
  // RUNNING says its containers were started; the command comes a moment later (bubblewrap first).
  await until(sleeping, { describe: 'napper sleeps' });
  const before = events.length;
  await backend.suspend('napper');
  assert.equal(sleeping(), false, 'its processes are gone: its resources are free');
  assert.equal((await backend.knownJobs()).has('napper'), false, 'the backend forgot the run');
  assert.deepEqual(
    events.slice(before).filter((e) => e.jobId === 'napper'),
    [],
    'nothing of its stop is told',
  );

  const resumed = events.length;
  await backend.submitVolcanoJob('napper', job);
  await runningSince(resumed);
  await until(sleeping, { describe: 'the same job runs again' });
  assert.deepEqual(
    events
      .slice(before)
      .filter((e) => e.jobId === 'napper' && (e.state === 'SUCCESS' || e.state === 'FAILURE')),
    [],
    'a suspended job has not ended, not while it was suspended nor since',
  );
  // Suspending a job the backend does not have is fine.
  await backend.suspend('never');
  const { cpu, memory } = backend.machines().total;
  assert.ok(cpu > 0 && memory > 0);
});
