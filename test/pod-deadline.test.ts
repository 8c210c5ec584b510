import assert from 'node:assert/strict';
import { test } from 'node:test';
import { manualClock } from './support/manual-clock.ts';
import { processBackend } from './support/process-backend.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** activeDeadlineSeconds as the kubelet keeps it: from the pod's start, then Failed with DeadlineExceeded. */

test('a pod past its activeDeadlineSeconds is killed and Failed, and the job says DeadlineExceeded', async (t) => {
  const clock = manualClock();
  const { backend, events, runtime } = await processBackend(t, undefined, clock);
  const task = shellTask('t', 1, 'sleep 60');
  task.template.spec.activeDeadlineSeconds = 5;
  await backend.submitVolcanoJob('late', vcjob('late', [task]));
  await until(() => events.some((e) => e.jobId === 'late' && e.state === 'RUNNING'), {
    describe: 'the job runs',
  });
  const started = clock.now();
  assert.equal(clock.nextDue(), started + 5000, 'the deadline is armed at the pod’s start');
  await clock.advance(4999);
  assert.equal(backend.phaseOf('late'), 'Running', 'not before its deadline');
  await clock.advance(1);
  const end = await until(
    () => events.find((e) => e.jobId === 'late' && (e.state === 'SUCCESS' || e.state === 'FAILURE')),
    { describe: 'the job ends' },
  );
  assert.equal(end.state, 'FAILURE');
  assert.equal(
    end.status,
    'Rank 0 was stopped: DeadlineExceeded (the pod was active longer than its activeDeadlineSeconds, 5 s)',
  );
  assert.equal(backend.phaseOf('late'), 'Failed');
  assert.ok(runtime.pods.get('late-t-0')?.destroyed, 'its processes are gone');
});

test('a PodFailed → RestartJob policy restarts a job whose pod passed its deadline', async (t) => {
  const clock = manualClock();
  const { backend, events } = await processBackend(t, undefined, clock);
  const task = shellTask('t', 1, 'sleep 60', {
    extra: { policies: [{ event: 'PodFailed', action: 'RestartJob' }] },
  });
  task.template.spec.activeDeadlineSeconds = 2;
  await backend.submitVolcanoJob('again', vcjob('again', [task], { maxRetry: 2 }));
  await until(() => events.some((e) => e.jobId === 'again' && e.state === 'RUNNING'), {
    describe: 'the job runs',
  });
  await clock.advance(2000);
  await until(() => events.some((e) => e.jobId === 'again' && /restarting/.test(e.status)), {
    describe: 'the job restarts',
  });
  const state = () =>
    `${clock.pending()} ${backend.phaseOf('again')}: ${events
      .filter((e) => e.jobId === 'again')
      .map((e) => e.status)
      .join(' | ')}`;
  await until(() => state().startsWith('1 Running'), {
    describe: 'the new pod runs with its own deadline',
  }).catch((e) => {
    throw new Error(`${e.message}: ${state()}`);
  });
  await clock.advance(2000);
  const end = await until(
    () => events.find((e) => e.jobId === 'again' && (e.state === 'SUCCESS' || e.state === 'FAILURE')),
    { describe: 'the job ends when its second pod passes its deadline (maxRetry 2)' },
  );
  assert.match(end.status, /DeadlineExceeded/);
});
