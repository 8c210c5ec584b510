import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type JobSummary,
  type PodSummary,
  reportOf,
  summarizeJob,
  summarizePod,
  summarizePodGroup,
} from '../src/backends/kubernetes/states.ts';

const job = (phase: string, extra: Partial<JobSummary> = {}): JobSummary => ({
  jobId: 'j1',
  namespace: 'ns',
  name: 'j-j1',
  phase,
  reason: '',
  message: '',
  running: 0,
  minAvailable: 2,
  ...extra,
});

const pod = (rank: number, extra: Partial<PodSummary> = {}): PodSummary => ({
  jobId: 'j1',
  namespace: 'ns',
  name: `j-j1-job-${rank}`,
  rank,
  phase: 'Running',
  reason: '',
  message: '',
  ip: '10.0.0.1',
  ready: true,
  unschedulable: '',
  started: true,
  lost: false,
  evicted: false,
  killedByController: false,
  deleting: false,
  ...extra,
});

const ended = (exitCode: number, reason = exitCode === 0 ? 'Completed' : 'Error') => ({ exitCode, reason });

test('Pending waits in the queue with the scheduler reason; a running job waiting again stays RUNNING', () => {
  assert.deepEqual(reportOf(job('Pending'), [], undefined, undefined), {
    state: 'IN_QUEUE',
    status: 'The job is waiting in the queue',
  });
  const group = {
    jobId: 'j1',
    phase: 'Pending',
    unschedulable: '2/2 tasks in gang unschedulable: 2 Insufficient cpu',
  };
  assert.match(
    reportOf(job('Pending'), [], group, 'IN_QUEUE').status,
    /queue: 2\/2 tasks in gang unschedulable/,
  );
  const waiting = pod(0, {
    phase: 'Pending',
    unschedulable: '0/3 nodes are available: 3 Insufficient memory.',
  });
  assert.match(reportOf(job('Pending'), [waiting], undefined, undefined).status, /Insufficient memory/);
  assert.equal(reportOf(job('Pending'), [], undefined, 'RUNNING').state, 'RUNNING');
});

test('Running reports ready counts; in-between phases keep the state and say what happens', () => {
  assert.deepEqual(reportOf(job('Running', { running: 1 }), [pod(0)], undefined, 'IN_QUEUE'), {
    state: 'RUNNING',
    status: 'The job is running (1/2 ready)',
  });
  for (const phase of ['Restarting', 'Completing', 'Terminating', 'Aborting']) {
    const r = reportOf(job(phase, { reason: 'PodFailed' }), [], undefined, 'RUNNING');
    assert.equal(r.state, 'RUNNING', phase);
    assert.match(
      r.status,
      phase === 'Restarting' ? /restarting \(PodFailed\)/ : new RegExp(`ending \\(${phase}: PodFailed\\)`),
    );
    assert.equal(reportOf(job(phase), [], undefined, undefined).state, 'IN_QUEUE');
  }
  assert.match(
    reportOf(job('Mystery'), [], undefined, 'RUNNING').status,
    /Volcano reports the job as Mystery/,
  );
});

test('Completed, Terminated and Failed with exit codes are SUCCESS: the platform ran the job to its end', () => {
  const completed = reportOf(
    job('Completed'),
    [pod(0, { ended: ended(0) }), pod(1, { ended: ended(0) })],
    undefined,
    'RUNNING',
  );
  assert.deepEqual(completed, {
    state: 'SUCCESS',
    status: 'The job finished (exit code 0 on every rank)',
    exitCodes: { '0': 0, '1': 0 },
  });
  for (const phase of ['Terminated', 'Failed']) {
    const r = reportOf(
      job(phase),
      [pod(0, { ended: ended(3) }), pod(1, { ended: ended(143) })],
      undefined,
      'RUNNING',
    );
    assert.equal(r.state, 'SUCCESS', phase);
    assert.equal(r.status, 'The job finished with non-zero exit codes (rank 0: 3, rank 1: 143)');
    assert.deepEqual(r.exitCodes, { '0': 3, '1': 143 });
  }
  assert.deepEqual(reportOf(job('Completed'), [], undefined, 'RUNNING'), {
    state: 'SUCCESS',
    status: 'The job finished',
  });
});

test('OOM kills, evictions, lost nodes, deleted pods, aborts and failures without exits are FAILURE', () => {
  const cases: [string, PodSummary[], RegExp][] = [
    [
      'Failed',
      [pod(0, { ended: ended(0) }), pod(1, { ended: ended(137, 'OOMKilled') })],
      /rank 1 ran out of memory \(OOMKilled\)/,
    ],
    [
      'Terminated',
      [pod(0, { evicted: true, message: 'The node was low on resource: memory.', ended: ended(137) })],
      /rank 0 was evicted \(The node was low/,
    ],
    [
      'Aborted',
      [pod(0, { lost: true, message: 'node-1 is unresponsive' })],
      /rank 0 was lost with its node \(node-1 is unresponsive\)/,
    ],
    ['Aborted', [pod(1, { deletedUnexpectedly: true })], /rank 1's pod was deleted while the job ran/],
    // Volcano's abort deletes rank 0 after rank 1 was lost: the first seen is named.
    [
      'Aborted',
      [
        pod(0, { deletedUnexpectedly: true, deletedSeenAt: 20 }),
        pod(1, { deletedUnexpectedly: true, deletedSeenAt: 10 }),
      ],
      /rank 1's pod was deleted while the job ran/,
    ],
  ];
  for (const [phase, pods, status] of cases) {
    const r = reportOf(job(phase), pods, undefined, 'RUNNING');
    assert.equal(r.state, 'FAILURE', String(status));
    assert.match(r.status, status);
  }
  assert.deepEqual(reportOf(job('Aborted', { reason: 'CommandIssued' }), [], undefined, 'RUNNING'), {
    state: 'FAILURE',
    status: 'Volcano aborted the job (CommandIssued)',
  });
  assert.deepEqual(reportOf(job('Failed', { message: 'max retry reached' }), [], undefined, 'IN_QUEUE'), {
    state: 'FAILURE',
    status: 'Volcano failed the job (max retry reached)',
  });
});

test('summaries read the fields the mapping needs and ignore objects without our job label', () => {
  assert.equal(summarizeJob({ metadata: { name: 'x', labels: {} } }), undefined);
  const j = summarizeJob({
    metadata: {
      name: 'j-a',
      namespace: 'n',
      labels: { 'ucompute.dev/job-id': 'a' },
      annotations: { 'ucompute.dev/output-folder': '/home/x' },
    },
    spec: { minAvailable: 3 },
    status: { state: { phase: 'Running' }, running: 2 },
  });
  assert.deepEqual(j, {
    jobId: 'a',
    namespace: 'n',
    name: 'j-a',
    phase: 'Running',
    reason: '',
    message: '',
    running: 2,
    minAvailable: 3,
    outputFolder: '/home/x',
  });
  const p = summarizePod({
    metadata: {
      name: 'j-a-job-2',
      namespace: 'n',
      labels: { 'ucompute.dev/job-id': 'a' },
      annotations: { 'volcano.sh/controller-out-of-sync': 'true' },
    },
    status: {
      phase: 'Failed',
      reason: 'Evicted',
      conditions: [{ type: 'PodScheduled', status: 'False', message: 'no nodes' }],
      containerStatuses: [
        { name: 'user-job', state: { terminated: { exitCode: 137, reason: 'OOMKilled', signal: 9 } } },
      ],
    },
  });
  assert.equal(p?.rank, 2);
  assert.deepEqual(p?.ended, { exitCode: 137, reason: 'OOMKilled', signal: 9 });
  assert.equal(p?.evicted, true);
  assert.equal(p?.killedByController, true);
  assert.equal(p?.unschedulable, 'no nodes');
  const lost = summarizePod({
    metadata: { name: 'j-a-job-0', labels: { 'ucompute.dev/job-id': 'a', 'volcano.sh/task-index': '0' } },
    status: {
      phase: 'Running',
      conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByTaintManager' }],
    },
  });
  assert.equal(lost?.lost, true);
  const g = summarizePodGroup({
    metadata: { name: 'pg', labels: { 'ucompute.dev/job-id': 'a' } },
    status: {
      phase: 'Pending',
      conditions: [{ type: 'Unschedulable', status: 'True', message: '1/1 tasks in gang unschedulable' }],
    },
  });
  assert.deepEqual(g, { jobId: 'a', phase: 'Pending', unschedulable: '1/1 tasks in gang unschedulable' });
});
