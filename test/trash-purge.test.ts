import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { PURGE_INTERVAL_MS, trashPurge } from '../src/storage/trash.ts';
import { manualClock } from './support/manual-clock.ts';
import { until } from './support/until.ts';

/**
 * What has been in a drive's Trash for `storage.trashDays` is deleted, hour by hour; what was put
 * there since stays. The time an entry was put there is its ctime (a move sets it).
 */

const DAY = 86_400_000;

test('entries older than the age are purged from every drive, newer ones stay', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'ucompute-trash-purge-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  for (const drive of ['home/alice', 'projects/climate']) {
    await mkdir(join(root, drive, 'Trash/old-run/out'), { recursive: true });
    await writeFile(join(root, drive, 'Trash/old-run/out/a.dat'), 'x'.repeat(100));
    await writeFile(join(root, drive, 'kept.txt'), 'not in the trash');
  }
  await mkdir(join(root, 'home/bob'), { recursive: true }); // a drive without a Trash
  const trashedAt = Date.now();
  // An hour before the entries are 30 days old.
  const clock = manualClock(trashedAt + 30 * DAY - PURGE_INTERVAL_MS / 2);
  const purge = trashPurge({ root, days: 30, clock });
  purge.start();
  t.after(() => purge.stop());
  const trashOf = (drive: string) => readdir(join(root, drive, 'Trash'));

  await clock.advance(0);
  assert.deepEqual(await purge.purge(), { entries: 0, bytes: 0 });
  assert.deepEqual(await trashOf('home/alice'), ['old-run']);

  await until(() => clock.nextDue() === clock.now() + PURGE_INTERVAL_MS, {
    describe: 'the first pass ended and armed the next, an hour on',
  });
  await clock.advance(PURGE_INTERVAL_MS);
  await until(
    async () =>
      (await trashOf('home/alice')).length === 0 && (await trashOf('projects/climate')).length === 0,
    {
      describe: 'both trashes are purged at the next hourly pass',
    },
  );
  assert.deepEqual(await readdir(join(root, 'home/alice')), ['Trash', 'kept.txt']);
  assert.deepEqual(await readdir(join(root, 'home/bob')), []);
});
