import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OUTPUT_FOLDER_ANNOTATION } from '../../src/volcano/labels.ts';
import { openTestBackend } from '../support/local-backend.ts';
import { needs } from '../support/local-tools.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const tools = await needs('bwrap', 'nft', 'ip', 'du');

test('a job that writes past its disk limit ends FAILURE saying how much it used', tools, async (t) => {
  const { home, backend, ended } = await openTestBackend(t, {
    config: { diskLimitBytes: 2 ** 20, diskCheckIntervalMs: 200 },
  });
  const folder = 'home/alice/Jobs/big';
  await mkdir(join(home, 'storage', folder), { recursive: true });
  const task = shellTask('main', 1, 'head -c 3000000 /dev/urandom > /work/big; sleep 60');
  task.template.spec.volumes = [{ name: 'work', persistentVolumeClaim: { claimName: 'ucompute-storage' } }];
  task.template.spec.containers[0]!.volumeMounts = [{ name: 'work', mountPath: '/work', subPath: folder }];
  const job = vcjob('big', [task]);
  job.metadata.annotations = { [OUTPUT_FOLDER_ANNOTATION]: folder };
  await backend.submitVolcanoJob('big', job);
  const end = await ended('big', 30_000);
  assert.equal(end.state, 'FAILURE');
  // The check may come while the job is still writing: any use above the limit is what it reports,
  // in bytes when it is too close to the limit to show in MiB (a full run's check came at 1.0 MiB).
  const used =
    /^The job used (\d+\.\d) MiB of its 1\.0 MiB disk limit in its job folder$/.exec(end.status) ??
    /^The job used (\d+) B of its 1048576 B disk limit in its job folder$/.exec(end.status);
  assert.ok(used, end.status);
  const bytes = end.status.includes(' MiB of') ? Number(used[1]) * 2 ** 20 : Number(used[1]);
  assert.ok(bytes > 2 ** 20 && !end.status.includes('used 1.0 MiB'), end.status);
});
