import assert from 'node:assert/strict';
import { test } from 'node:test';
import { endsJob, policyCause } from '../src/backends/local/controller/end-messages.ts';
import { newRun } from '../src/backends/local/controller/job-run.ts';
import { processBackend } from './support/process-backend.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** A finished job's end message says what ended it, and claims nothing of a rank that was stopped. */

test("a policy's cause: the rank's end or the task's completion, and the action", () => {
  const run = newRun({
    id: 'p',
    job: vcjob('p', [shellTask('master', 1, 'true'), shellTask('work', 2, 'true')]),
    companions: [],
    phase: 'Running',
    retryCount: 0,
    admitted: true,
    submittedAt: 0,
    plugins: {},
  });
  const [master, , worker] = run.planned;
  const failed = { plan: worker!, exit: { exitCode: 3, signal: null, oomKilled: false } };
  assert.equal(
    policyCause(failed, 'PodFailed', 'AbortJob'),
    'rank 2 exited with code 3; its policy: AbortJob',
  );
  assert.equal(
    policyCause({ plan: master! }, 'TaskCompleted', 'CompleteJob'),
    'task master completed; its policy: CompleteJob',
  );
  assert.equal(
    policyCause({ plan: worker! }, 'PodEvicted', 'TerminateJob'),
    'rank 2: PodEvicted; its policy: TerminateJob',
  );
  assert.deepEqual(
    (['AbortJob', 'CompleteJob', 'TerminateJob', 'RestartJob', 'RestartTask', 'RestartPod'] as const).filter(
      endsJob,
    ),
    ['AbortJob', 'CompleteJob', 'TerminateJob'],
  );
});

test('an exitCode → AbortJob policy ends the job saying which rank exited how', async (t) => {
  const { backend, ended } = await processBackend(t);
  const task = shellTask('t', 2, 'if [ "$VC_TASK_INDEX" = 1 ]; then exit 3; fi; sleep 30', {
    extra: { policies: [{ exitCode: 3, action: 'AbortJob' }] },
  });
  await backend.submitVolcanoJob('abort', vcjob('abort', [task], { plugins: { env: [] } }));
  const end = await ended('abort');
  assert.equal(backend.phaseOf('abort'), 'Aborted');
  assert.equal(end.state, 'FAILURE');
  assert.equal(end.status, 'The job was aborted: rank 1 exited with code 3; its policy: AbortJob');
});

test('minSuccess and CompleteJob completions say which ranks were stopped, not "exit code 0 on every rank"', async (t) => {
  const { backend, ended } = await processBackend(t);
  await backend.submitVolcanoJob(
    'ms',
    vcjob('ms', [shellTask('t', 3, 'if [ "$VC_TASK_INDEX" = 2 ]; then sleep 30; fi')], {
      minSuccess: 2,
      plugins: { env: [] },
    }),
  );
  const minSuccess = await ended('ms');
  assert.equal(minSuccess.state, 'SUCCESS');
  assert.equal(
    minSuccess.status,
    'The job completed (minSuccess 2 reached): 2 of 3 ranks exited with code 0; rank 2 was stopped before it ended by itself',
  );

  const master = shellTask('master', 1, 'true', {
    extra: { policies: [{ event: 'TaskCompleted', action: 'CompleteJob' }] },
  });
  await backend.submitVolcanoJob('tc', vcjob('tc', [master, shellTask('worker', 2, 'sleep 30')]));
  const completed = await ended('tc');
  assert.equal(completed.state, 'SUCCESS');
  assert.equal(
    completed.status,
    'The job completed (task master completed; its policy: CompleteJob): 1 of 3 ranks exited with code 0; ranks 1, 2 were stopped before they ended by themselves',
  );
});
