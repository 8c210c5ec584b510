/**
 * The lifecycle policies ucompute gives its Volcano Jobs (src/plugins/task.ts), as Volcano's own
 * webhooks and job controller apply them: a replica that is lost ends the whole gang, and nothing
 * is retried.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { kubectl, kubectlJson, objectsOf, simulated, skip, spec, startUcompute } from './cluster.ts';

test('a replica whose pod is deleted aborts the whole gang (PodEvicted → AbortJob): a FAILURE, not a retry', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const id = await ucompute.submit(spec('sim-batch', simulated(0, '1h'), { replicas: 2 }));
  await ucompute.untilState(id, 'RUNNING');
  const [job] = (
    await kubectlJson(['get', 'jobs.batch.volcano.sh', '-n', 'ucompute', '-l', `ucompute.dev/job-id=${id}`])
  ).items;
  // As Volcano's admission webhooks left them: the policies as sent; ucompute sends no maxRetry
  // (no policy restarts the job) and the mutating webhook stores Volcano's default 3.
  assert.deepEqual(job.spec.policies, [
    { event: 'PodFailed', action: 'TerminateJob' },
    { event: 'PodEvicted', action: 'AbortJob' },
  ]);
  assert.equal(job.spec.maxRetry, 3);
  await kubectl(['delete', 'pod', '-n', 'ucompute', `${job.metadata.name}-job-1`, '--wait=false']);
  const failed = await ucompute.untilState(id, 'FAILURE');
  // Rank 1 is the one lost (or, when Volcano's abort is seen first, the abort is the reason);
  // rank 0's pod is deleted by Volcano as it aborts the job: not a loss of its own.
  const ended = failed.updates.at(-1).status;
  assert.match(
    ended,
    /^The job failed: (rank 1's pod was deleted while the job ran|Volcano aborted the job)/,
  );
  await until(async () => (await objectsOf(id)).length === 0, {
    describe: 'the job objects deleted, rank 0 with them',
    timeout: 180_000,
    every: 200,
  });
});
