import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  companionsToCreate,
  evaluation,
  isOrphan,
  isShared,
  jobDeletion,
  keptPod,
  ORPHAN_MIN_AGE_MS,
  podDeletion,
  podlessSince,
  queueIsOpen,
  STRANDED_AFTER_MS,
  sharedKey,
  strandedReport,
} from '../src/backends/kubernetes/decisions.ts';
import type { PodSummary, Report } from '../src/backends/kubernetes/states.ts';

const running: Report = { state: 'RUNNING', status: 'The job is running (1/1 ready)' };

test('evaluation: unknown or done jobs report nothing, final phases finish, changes report, repeats do not', () => {
  const rows: [Parameters<typeof evaluation>[0], Report, string][] = [
    [{ done: false }, running, 'nothing'],
    [{ phase: 'Running', done: true }, running, 'nothing'],
    [{ phase: 'Completed', done: true }, running, 'nothing'],
    ...['Completed', 'Failed', 'Aborted', 'Terminated'].map(
      (phase) =>
        [{ phase, done: false }, running, 'finish'] as [{ phase: string; done: boolean }, Report, string],
    ),
    [{ phase: 'Running', done: false }, running, 'report'],
    [
      { phase: 'Running', done: false, reported: { state: 'IN_QUEUE', status: 'waiting' } },
      running,
      'report',
    ],
    [
      { phase: 'Running', done: false, reported: { state: 'RUNNING', status: 'other text' } },
      running,
      'report',
    ],
    [{ phase: 'Running', done: false, reported: { ...running } }, running, 'nothing'],
    [{ phase: 'Pending', done: false, reported: { ...running } }, running, 'nothing'],
  ];
  for (const [facts, report, action] of rows) {
    const decided = evaluation(facts, report);
    assert.equal(decided.action, action, JSON.stringify(facts));
    if (decided.action !== 'nothing') assert.equal(decided.report, report);
  }
});

test('podDeletion: a pod of an unknown job is forgotten; one deleted under a running job by someone else is lost, not one Volcano deletes as it ends the job', () => {
  const pod = { killedByController: false };
  const ended = { killedByController: false, ended: { exitCode: 0, reason: 'Completed' } };
  const killed = { killedByController: true };
  const rows: [Parameters<typeof podDeletion>[0], Parameters<typeof podDeletion>[1], string][] = [
    [{ done: false }, pod, 'forget'],
    [{ phase: 'Running', done: false }, pod, 'lost'],
    [{ phase: 'Pending', done: false }, pod, 'lost'],
    [{ phase: 'Running', done: false }, ended, 'ignore'],
    [{ phase: 'Running', done: false }, killed, 'ignore'],
    [{ phase: 'Running', done: true }, pod, 'ignore'],
    [{ phase: 'Completed', done: false }, pod, 'ignore'],
    [{ phase: 'Aborted', done: false }, pod, 'ignore'],
    // Volcano's controller deletes the other ranks itself once a policy aborts or ends the job.
    [{ phase: 'Aborting', done: false }, pod, 'ignore'],
    [{ phase: 'Terminating', done: false }, pod, 'ignore'],
    [{ phase: 'Restarting', done: false }, pod, 'ignore'],
    [{ phase: 'Completing', done: false }, pod, 'ignore'],
  ];
  for (const [job, p, expected] of rows)
    assert.equal(podDeletion(job, p), expected, JSON.stringify([job, p]));
});

test('keptPod: a deletion begun or ended under a running job marks the rank lost once, stamped when first seen', () => {
  const running = { phase: 'Running', done: false };
  const pod = { rank: 1, killedByController: false, deleting: false } as PodSummary;
  const deleting = { ...pod, deleting: true };
  assert.equal(keptPod(running, undefined, pod, false, 5), pod);
  assert.deepEqual(keptPod(running, pod, deleting, false, 5), {
    ...deleting,
    deletedUnexpectedly: true,
    deletedSeenAt: 5,
  });
  assert.deepEqual(keptPod(running, undefined, pod, true, 7), {
    ...pod,
    deletedUnexpectedly: true,
    deletedSeenAt: 7,
  });
  // Once lost, a later change or the deletion itself keeps the first stamp, whatever the phase.
  const lost = keptPod(running, pod, deleting, false, 5);
  assert.equal(keptPod({ phase: 'Aborting', done: false }, lost, deleting, true, 9).deletedSeenAt, 5);
  // Volcano's own deletions, as it aborts the job, are no loss.
  assert.equal(keptPod({ phase: 'Aborting', done: false }, pod, deleting, false, 5), deleting);
  assert.equal(
    keptPod(running, pod, { ...deleting, killedByController: true }, false, 5).deletedUnexpectedly,
    undefined,
  );
});

test('jobDeletion: only a known, live job that is not being submitted nor suspended is lost', () => {
  const base = { known: true, done: false, suspended: false, submitting: false };
  assert.equal(jobDeletion(base), 'lost');
  assert.equal(jobDeletion({ ...base, suspended: true }), 'suspended');
  assert.equal(jobDeletion({ ...base, suspended: true, known: false }), 'suspended');
  assert.equal(jobDeletion({ ...base, known: false }), 'ignore');
  assert.equal(jobDeletion({ ...base, done: true }), 'ignore');
  assert.equal(jobDeletion({ ...base, submitting: true }), 'ignore');
});

test('isOrphan: objects of gone jobs older than the grace are orphans; live, young or unlabelled ones are not', () => {
  const now = 100 * ORPHAN_MIN_AGE_MS;
  const live = (id: string) => id === 'alive';
  const old = now - ORPHAN_MIN_AGE_MS;
  assert.equal(isOrphan({ jobId: 'gone', createdAt: old }, live, now), true);
  assert.equal(isOrphan({ jobId: 'gone', createdAt: old + 1 }, live, now), false);
  assert.equal(isOrphan({ jobId: 'alive', createdAt: 0 }, live, now), false);
  assert.equal(isOrphan({ jobId: undefined, createdAt: 0 }, live, now), false);
});

test('companionsToCreate: what others refer to first; shared ones (no job id) keyed per namespace', () => {
  const job = { 'ucompute.dev/job-id': 'j1' };
  const object = (kind: string, name: string, labels?: Record<string, string>, namespace?: string) => ({
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}), ...(labels ? { labels } : {}) },
  });
  const companions = [
    object('Service', 's', job, 'n'),
    object('Secret', 'x', job, 'n'),
    object('Queue', 'q'),
    object('NetworkPolicy', 'policy-j1', job, 'n'),
    object('NetworkPolicy', 'job-isolation', undefined, 'n'),
    object('Namespace', 'n'),
    object('ConfigMap', 'c', job, 'n'),
  ];
  const names = (list: { kind: string; metadata: { name: string } }[]) =>
    list.map((c) => `${c.kind}/${c.metadata.name}`);
  assert.deepEqual(names(companionsToCreate(companions)), [
    'Namespace/n',
    'Queue/q',
    'NetworkPolicy/policy-j1',
    'NetworkPolicy/job-isolation',
    'ConfigMap/c',
    'Secret/x',
    'Service/s',
  ]);
  assert.deepEqual(companions.filter(isShared).map(sharedKey), [
    'Queue/q',
    'NetworkPolicy/n/job-isolation',
    'Namespace/n',
  ]);
  // The same policy name in another namespace is another object.
  assert.notEqual(
    sharedKey(object('NetworkPolicy', 'job-isolation', undefined, 'm')),
    sharedKey(object('NetworkPolicy', 'job-isolation', undefined, 'n')),
  );
});

test('queueIsOpen: only the state Open takes jobs (a new queue has none until Volcano opens it)', () => {
  assert.equal(queueIsOpen({ status: { state: 'Open' } }), true);
  for (const queue of [
    undefined,
    {},
    { status: {} },
    { status: { state: 'Closed' } },
    { status: { state: '' } },
  ])
    assert.equal(queueIsOpen(queue), false, JSON.stringify(queue));
});

test('podlessSince: an admitted gang (PodGroup Inqueue or Running) of a live job with no pods waits since first seen so; anything else does not', () => {
  const waiting = { phase: 'Pending', groupPhase: 'Inqueue', pods: 0, done: false };
  const rows: [Parameters<typeof podlessSince>[0], number | undefined, number | undefined][] = [
    [waiting, undefined, 1000],
    [waiting, 500, 500],
    [{ ...waiting, phase: 'Running', groupPhase: 'Running' }, 700, 700],
    [{ ...waiting, pods: 1 }, 500, undefined],
    [{ ...waiting, groupPhase: 'Pending' }, 500, undefined],
    [{ ...waiting, groupPhase: undefined }, undefined, undefined],
    [{ ...waiting, phase: 'Completing' }, 500, undefined],
    [{ ...waiting, phase: undefined }, undefined, undefined],
    [{ ...waiting, done: true }, 500, undefined],
  ];
  for (const [facts, since, expected] of rows)
    assert.equal(podlessSince(facts, since, 1000), expected, JSON.stringify({ facts, since }));
});

test('strandedReport: the report is kept until the wait lasts STRANDED_AFTER_MS, then it says why and what helps', () => {
  const queued: Report = { state: 'IN_QUEUE', status: 'The job is waiting in the queue' };
  const since = Date.UTC(2026, 10, 26, 20, 0);
  assert.equal(strandedReport(queued, 'Inqueue', undefined, since + STRANDED_AFTER_MS), queued);
  assert.equal(strandedReport(queued, 'Inqueue', since, since + STRANDED_AFTER_MS - 1), queued);
  const stranded = strandedReport(queued, 'Inqueue', since, since + STRANDED_AFTER_MS);
  assert.equal(stranded.state, 'IN_QUEUE');
  assert.match(stranded.status, /^The job is waiting in the queue\. Volcano has not created its pods: /);
  assert.match(stranded.status, /PodGroup has been Inqueue with no pods since 2026-11-26T20:00:00\.000Z/);
  assert.match(stranded.status, /restarting volcano-controller-manager/);
  // The same text for as long as it lasts: one update, not one per look.
  assert.deepEqual(strandedReport(queued, 'Inqueue', since, since + 10 * STRANDED_AFTER_MS), stranded);
});
