import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { processBackend } from './support/process-backend.ts';
import { until } from './support/until.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/**
 * The ended jobs' kept state and logs are bounded in total bytes (`local.retainedLogsBytes`): past
 * the bound the oldest ended jobs' folders are removed, however few jobs that is; the newest ended
 * job is always kept.
 */

const KIB = 1024;
const printing = (kib: number) => shellTask('t', 1, `head -c ${kib * KIB} /dev/zero`);
const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

test('past the bound the oldest ended jobs’ logs go, the newest stay', async (t) => {
  const { backend, ended, stateDir } = await processBackend(t, undefined, undefined, 1024 * KIB);
  const folder = (id: string) => join(stateDir, 'jobs', id);
  const run = async (id: string, kib: number) => {
    await backend.submitVolcanoJob(id, vcjob(id, [printing(kib)]));
    await ended(id);
  };
  await run('first', 600);
  assert.ok(await exists(folder('first')));
  await run('second', 600);
  await until(async () => !(await backend.knownJobs()).has('first') && !(await exists(folder('first'))), {
    describe: 'the first job’s state and logs are removed once both hold more than 1 MiB',
  });
  assert.ok((await backend.knownJobs()).has('second'));
  // `logs` of the removed job says so (test/logs-gone.test.ts), rather than printing nothing.
  assert.match(
    backend.logsRemoved?.('first') ?? '',
    /removed with its kept folder \(local\.retainedLogsBytes/,
  );
  assert.equal(backend.logsRemoved?.('second'), undefined);
  await run('third', 100);
  await run('fourth', 100);
  const known = await backend.knownJobs();
  for (const id of ['second', 'third', 'fourth']) {
    assert.ok(known.has(id), `${id} is kept: 800 KiB together`);
    assert.ok(await exists(folder(id)), id);
  }

  // A job whose logs alone exceed the bound is still kept while it is the newest.
  await run('large', 1100);
  // The end is reported before the job is counted among the kept ones: wait for the count.
  await until(
    async () => {
      const known = await backend.knownJobs();
      return known.has('large') && ['second', 'third', 'fourth'].every((id) => !known.has(id));
    },
    { describe: 'the older jobs give way to the large one, which is kept' },
  );
});
