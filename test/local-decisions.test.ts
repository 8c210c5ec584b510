import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  crashBackoffMs,
  type ExitDecision,
  exitDecision,
  killDecision,
  podsToCreate,
  restartStillWanted,
  syncedPhase,
} from '../src/backends/local/controller/decisions.ts';
import { type JobRun, newRun, type PodRecord } from '../src/backends/local/controller/job-run.ts';
import { jobStatus } from '../src/backends/local/controller/job-status.ts';
import type { ContainerExit } from '../src/backends/local/runtime.ts';
import type { PodPhase } from '../src/volcano/api/phases.ts';
import type { TaskSpec, VolcanoJob, VolcanoJobPhase } from '../src/volcano/api/types.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** The local controller's decisions, over tables of observed states: no process, no clock. */

type PodState = [phase: PodPhase, restarts?: number, killing?: boolean];

/** A run of `job` in `phase` whose pods (in plan order) are in the given states; missing ones have no record. */
function runOf(
  job: VolcanoJob,
  phase: VolcanoJobPhase,
  pods: PodState[],
  extra: Partial<JobRun> = {},
): JobRun {
  const run = newRun({
    id: 'j',
    job,
    companions: [],
    phase,
    retryCount: 0,
    admitted: true,
    submittedAt: 0,
    plugins: {},
  });
  pods.forEach(([podPhase, restarts = 0, killing = false], i) => {
    const plan = run.planned[i]!;
    run.pods.set(plan.name, { plan, phase: podPhase, restarts, killing });
  });
  return Object.assign(run, extra);
}

const task = (
  restartPolicy: 'Never' | 'OnFailure' | 'Always',
  extra: Partial<TaskSpec> = {},
  replicas = 2,
) => {
  const t = shellTask('work', replicas, 'true', { extra });
  t.template.spec.restartPolicy = restartPolicy;
  return t;
};
const exited = (exitCode: number, more: Partial<ContainerExit> = {}): ContainerExit => ({
  exitCode,
  signal: null,
  oomKilled: false,
  ...more,
});
const first = (run: JobRun): PodRecord => [...run.pods.values()][0]!;

test('a pod whose containers ended: each of the six outcomes, from its policy, retries and the job phase', () => {
  const rows: [string, JobRun, ContainerExit, ExitDecision][] = [
    [
      'a pod being killed',
      runOf(vcjob('a', [task('Never')]), 'Running', [['Running', 0, true]]),
      exited(0),
      { kind: 'ignore' },
    ],
    [
      'a job already over',
      runOf(vcjob('a', [task('Never')]), 'Completed', [['Running']]),
      exited(0),
      { kind: 'ignore' },
    ],
    [
      'a lost supervisor',
      runOf(vcjob('a', [task('Always')]), 'Running', [['Running']]),
      exited(137, { signal: 'SIGKILL', supervisorLost: true }),
      { kind: 'killedFromOutside', fault: 'ucompute lost the supervisor of rank 0' },
    ],
    [
      'SIGKILL not from the OOM killer, even under restartPolicy Always',
      runOf(vcjob('a', [task('Always')]), 'Running', [['Running']]),
      exited(137, { signal: 'SIGKILL' }),
      { kind: 'killedFromOutside', fault: 'Rank 0 was killed by SIGKILL from outside the job' },
    ],
    [
      'Never, exit 0, the other replica still running',
      runOf(vcjob('a', [task('Never')]), 'Running', [['Running'], ['Running']]),
      exited(0),
      { kind: 'podSucceeded', taskCompleted: false },
    ],
    [
      'Never, exit 0, the other replica succeeded',
      runOf(vcjob('a', [task('Never')]), 'Running', [['Running'], ['Succeeded']]),
      exited(0),
      { kind: 'podSucceeded', taskCompleted: true },
    ],
    [
      'Never, exit 1',
      runOf(vcjob('a', [task('Never')]), 'Running', [['Running']]),
      exited(1),
      { kind: 'podFailed' },
    ],
    [
      'OnFailure, exit 0',
      runOf(vcjob('a', [task('OnFailure')]), 'Running', [['Running'], ['Succeeded']]),
      exited(0),
      { kind: 'podSucceeded', taskCompleted: true },
    ],
    [
      'OnFailure, exit 1, within maxRetry',
      runOf(vcjob('a', [task('OnFailure')]), 'Running', [['Running', 1]]),
      exited(1),
      { kind: 'restartInPlace', backoffMs: 0 },
    ],
    [
      'OnFailure, the restart that reaches maxRetry, no TaskFailed policy',
      runOf(vcjob('a', [task('OnFailure')]), 'Running', [
        ['Running', 1],
        ['Running', 1],
      ]),
      exited(1),
      { kind: 'restartInPlace', backoffMs: 0 },
    ],
    [
      'OnFailure, one restart past maxRetry (3, counted over the task), no TaskFailed policy',
      runOf(vcjob('a', [task('OnFailure')]), 'Running', [
        ['Running', 2],
        ['Running', 1],
      ]),
      exited(1),
      { kind: 'restartInPlace', backoffMs: 10_000 },
    ],
    [
      'OnFailure, three restarts past maxRetry 1',
      runOf(vcjob('a', [task('OnFailure', { maxRetry: 1 })]), 'Running', [['Running', 3]]),
      exited(1),
      { kind: 'restartInPlace', backoffMs: 40_000 },
    ],
    [
      'OnFailure, maxRetry reached with a TaskFailed policy',
      runOf(
        vcjob('a', [
          task('OnFailure', { maxRetry: 1, policies: [{ event: 'TaskFailed', action: 'AbortJob' }] }),
        ]),
        'Running',
        [['Running']],
      ),
      exited(1),
      { kind: 'taskFailed', action: 'AbortJob' },
    ],
    [
      'OnFailure, maxRetry -1: restarts without end',
      runOf(vcjob('a', [task('OnFailure', { maxRetry: -1 })]), 'Running', [['Running', 50]]),
      exited(1),
      { kind: 'restartInPlace', backoffMs: 0 },
    ],
    [
      'Always, exit 0',
      runOf(vcjob('a', [task('Always')]), 'Running', [['Running']]),
      exited(0),
      { kind: 'restartInPlace', backoffMs: 0 },
    ],
    [
      'OnFailure, OOM-killed: no restart',
      runOf(vcjob('a', [task('OnFailure')]), 'Running', [['Running']]),
      exited(137, { signal: 'SIGKILL', oomKilled: true }),
      { kind: 'podFailed' },
    ],
    [
      'OnFailure, exit 1 while the job is still Pending: no restart',
      runOf(vcjob('a', [task('OnFailure')]), 'Pending', [['Running'], ['Pending']]),
      exited(1),
      { kind: 'podFailed' },
    ],
  ];
  for (const [why, run, exit, expected] of rows) {
    assert.deepEqual(exitDecision(run, first(run), exit), expected, why);
  }
  const gone = runOf(vcjob('a', [task('Never')]), 'Running', [['Running']]);
  const rec = first(gone);
  gone.pods.clear();
  assert.deepEqual(exitDecision(gone, rec, exited(0)), { kind: 'ignore' }, 'a pod no longer in the job');
});

test('the crash back-off doubles from 10 s to at most 5 minutes', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 30].map(crashBackoffMs),
    [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
  );
});

test('a restart after its back-off is still wanted only for the same live pod of a running job', () => {
  const run = runOf(vcjob('a', [task('OnFailure')]), 'Running', [['Running']]);
  const rec = first(run);
  assert.equal(restartStillWanted(run, rec), true);
  assert.equal(restartStillWanted({ ...run, phase: 'Terminating' }, rec), false);
  assert.equal(restartStillWanted(run, { ...rec }), false, 'replaced by another record');
  rec.killing = true;
  assert.equal(restartStillWanted(run, rec), false);
});

test('a kill: its phase, retries and victims per action; the last retry keeps finished pods', () => {
  const job = vcjob('a', [task('Never', {}, 2), { ...task('Never', {}, 1), name: 'other' }], { maxRetry: 2 });
  const states: PodState[] = [['Succeeded'], ['Running'], ['Pending']];
  const victims = (action: Parameters<typeof killDecision>[1], retryCount = 0, target = 0) => {
    const run = runOf(job, 'Running', states, { retryCount });
    const d = killDecision(run, action, [...run.pods.values()][target]);
    return d && { ...d, victims: d.victims.map((v) => v.plan.name) };
  };
  assert.deepEqual(victims('TerminateJob'), {
    retryCount: 0,
    phase: 'Terminating',
    victims: ['a-work-1', 'a-other-0'],
    preparePluginsAgain: false,
  });
  assert.deepEqual(victims('RestartJob'), {
    retryCount: 1,
    phase: 'Restarting',
    victims: ['a-work-0', 'a-work-1', 'a-other-0'],
    preparePluginsAgain: true,
  });
  assert.deepEqual(victims('RestartJob', 1)?.victims, ['a-work-1', 'a-other-0'], 'the last retry is soft');
  assert.deepEqual(victims('RestartPod', 0, 1)?.victims, ['a-work-1']);
  assert.deepEqual(victims('RestartTask', 0, 2)?.victims, ['a-other-0']);
  assert.deepEqual(victims('CompleteJob')?.phase, 'Completing');
  assert.equal(killDecision(runOf(job, 'Failed', states), 'TerminateJob'), null, 'a job already over');
});

test('which pods start next: the gang at once, dependents once their task runs, elastic ones where they fit', () => {
  const request = () => ({ cpuMillis: 1000, memoryBytes: 0 });
  const asked: string[] = [];
  const free = (cpuMillis: number) => () => {
    asked.push('free');
    return { cpuMillis, memoryBytes: 0 };
  };
  const names = (run: JobRun, cpus: number) => podsToCreate(run, request, free(cpus)).map((p) => p.name);

  const gang = runOf(vcjob('g', [task('Never', {}, 3)]), 'Pending', []);
  assert.deepEqual(names(gang, 0), ['g-work-0', 'g-work-1', 'g-work-2']);
  assert.deepEqual(asked, [], 'what is free is not asked for the gang');

  const dependent = vcjob('d', [
    { ...task('Never', {}, 1), name: 'master' },
    { ...task('Never', { dependsOn: { name: ['master'] } }, 2), name: 'worker' },
  ]);
  assert.deepEqual(names(runOf(dependent, 'Pending', [['Pending']]), 0), []);
  assert.deepEqual(names(runOf(dependent, 'Running', [['Running']]), 0), ['d-worker-0', 'd-worker-1']);

  const elastic = vcjob('e', [task('Never', {}, 4)], { minAvailable: 1 });
  assert.deepEqual(names(runOf(elastic, 'Running', [['Running']]), 2000), ['e-work-1', 'e-work-2']);
  assert.deepEqual(names(runOf(elastic, 'Running', [['Running']]), 0), []);
});

test('SyncJob: a job whose gang runs is Running, and its time starts then', () => {
  const job = vcjob('a', [task('Never', {}, 2)]);
  assert.deepEqual(syncedPhase(runOf(job, 'Pending', [['Running'], ['Running']])), {
    phase: 'Running',
    enteredRunning: true,
  });
  assert.deepEqual(syncedPhase(runOf(job, 'Pending', [['Running'], ['Pending']])), {
    phase: 'Pending',
    enteredRunning: false,
  });
  assert.deepEqual(syncedPhase(runOf(job, 'Running', [['Succeeded'], ['Succeeded']])).phase, 'Completed');
});

test("what a job says: its queue position, running, restarts, and each rank's outcome at the end", () => {
  const job = vcjob('a', [task('Never', {}, 2)]);
  const ended = (
    phase: VolcanoJobPhase,
    exits: (ContainerExit | undefined)[],
    extra: Partial<JobRun> = {},
  ) => {
    const run = runOf(job, phase, [['Succeeded'], ['Succeeded']], extra);
    [...run.pods.values()].forEach((p, i) => {
      const exit = exits[i];
      if (exit) p.exit = exit;
    });
    return jobStatus(run);
  };
  const rows: [string, ReturnType<typeof jobStatus>, ReturnType<typeof jobStatus>][] = [
    [
      'waiting',
      jobStatus(runOf(job, 'Pending', [], { admitted: false }), { position: 2, reason: 'waiting for 1 CPU' }),
      { state: 'IN_QUEUE', status: 'In the queue, position 2: waiting for 1 CPU' },
    ],
    ['not admitted, nothing to say', jobStatus(runOf(job, 'Pending', [], { admitted: false })), undefined],
    ['admitted', jobStatus(runOf(job, 'Pending', [])), { state: 'IN_QUEUE', status: 'The job is starting' }],
    [
      'started before, pending again',
      jobStatus(runOf(job, 'Pending', [], { startedAt: 1 })),
      { state: 'RUNNING', status: 'The job is starting its replicas again' },
    ],
    [
      'restarting',
      jobStatus(runOf(job, 'Restarting', [], { retryCount: 1 })),
      { state: 'RUNNING', status: 'The job is restarting (retry 1 of 3)' },
    ],
    ['between phases', jobStatus(runOf(job, 'Terminating', [])), undefined],
    [
      'every rank 0',
      ended('Completed', [exited(0), exited(0)]),
      { state: 'SUCCESS', status: 'The job finished (exit code 0 on every rank)', exitCodes: { 0: 0, 1: 0 } },
    ],
    [
      'a rank failed',
      ended('Failed', [exited(0), exited(3)]),
      {
        state: 'SUCCESS',
        status: 'The job ended (Failed): rank 1 exited with code 3',
        exitCodes: { 0: 0, 1: 3 },
      },
    ],
    [
      'OOM-killed',
      ended('Failed', [exited(137, { signal: 'SIGKILL', oomKilled: true }), exited(0)]),
      {
        state: 'FAILURE',
        status: 'Rank 0 exceeded its memory limit (OOM-killed)',
        exitCodes: { 0: 137, 1: 0 },
      },
    ],
    [
      "the platform's fault",
      ended('Failed', [exited(0), undefined], { fault: 'no room' }),
      { state: 'FAILURE', status: 'no room', exitCodes: { 0: 0 } },
    ],
    [
      'aborted',
      ended('Aborted', [exited(0), undefined]),
      { state: 'FAILURE', status: 'The job was aborted: a replica was lost', exitCodes: { 0: 0 } },
    ],
    [
      'a rank killed by a signal',
      ended('Failed', [exited(0), exited(139, { signal: 'SIGSEGV' })]),
      {
        state: 'SUCCESS',
        status: 'The job ended (Failed): rank 1 was killed by SIGSEGV',
        exitCodes: { 0: 0, 1: 139 },
      },
    ],
    [
      'aborted by a policy',
      ended('Aborted', [exited(0), exited(3)], { cause: 'rank 1 exited with code 3; its policy: AbortJob' }),
      {
        state: 'FAILURE',
        status: 'The job was aborted: rank 1 exited with code 3; its policy: AbortJob',
        exitCodes: { 0: 0, 1: 3 },
      },
    ],
    [
      'minSuccess reached while a rank still ran',
      (() => {
        const run = runOf(vcjob('m', [task('Never', {}, 3)], { minSuccess: 2 }), 'Completed', [
          ['Succeeded'],
          ['Succeeded'],
        ]);
        for (const p of run.pods.values()) p.exit = exited(0);
        return jobStatus(run);
      })(),
      {
        state: 'SUCCESS',
        status:
          'The job completed (minSuccess 2 reached): 2 of 3 ranks exited with code 0; rank 2 was stopped before it ended by itself',
        exitCodes: { 0: 0, 1: 0 },
      },
    ],
    [
      'ended before any replica',
      jobStatus(runOf(job, 'Terminated', [])),
      { state: 'SUCCESS', status: 'The job ended (Terminated) before any replica started' },
    ],
  ];
  for (const [why, actual, expected] of rows) assert.deepEqual(actual, expected, why);
});
