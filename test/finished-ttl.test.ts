import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ttlDelayMs } from '../src/backends/local/controller/finished-ttl.ts';
import { manualClock } from './support/manual-clock.ts';
import { processBackend } from './support/process-backend.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** ttlSecondsAfterFinished as Volcano keeps it: the finished job is deleted that long after it finished. */

test('the delay until a finished job is forgotten: none without a TTL or a finish time, never negative', () => {
  const job = vcjob('j', [shellTask('t', 1, 'true')], { ttlSecondsAfterFinished: 30 });
  assert.equal(ttlDelayMs({ job, finishedAt: 1000 }, 11_000), 20_000);
  assert.equal(ttlDelayMs({ job, finishedAt: 1000 }, 99_000), 0, 'found after a restart, long past it');
  assert.equal(ttlDelayMs({ job }, 0), null, 'finished before the finish time was saved');
  assert.equal(ttlDelayMs({ job: vcjob('k', [shellTask('t', 1, 'true')]), finishedAt: 0 }, 0), null);
});

test('a finished job with ttlSecondsAfterFinished is forgotten that long after it finished', async (t) => {
  const clock = manualClock();
  const { backend, ended } = await processBackend(t, undefined, clock);
  await backend.submitVolcanoJob(
    'brief',
    vcjob('brief', [shellTask('t', 1, 'echo done')], { ttlSecondsAfterFinished: 30 }),
  );
  await backend.submitVolcanoJob('kept', vcjob('kept', [shellTask('t', 1, 'echo done')]));
  await ended('brief');
  await ended('kept');
  await until(async () => (await backend.knownJobs()).has('brief') && clock.pending() > 0, {
    describe: 'the removal is armed',
  });
  await clock.advance(29_999);
  assert.ok((await backend.knownJobs()).has('brief'), 'kept until its TTL');
  await clock.advance(1);
  await until(async () => !(await backend.knownJobs()).has('brief'), {
    describe: 'the job is forgotten',
  });
  assert.ok((await backend.knownJobs()).has('kept'), 'a job without a TTL is kept');
});
