/**
 * What the server writes into a user's storage when it creates a job (the job folder and its
 * JobParameters.json) goes where the path says, never through a symlink an earlier job planted.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { directoryStorage } from '../../src/storage/directory.ts';

async function planted(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-storage-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'storage');
  const elsewhere = join(dir, 'elsewhere');
  await mkdir(join(root, 'home/alice'), { recursive: true });
  await mkdir(join(elsewhere, 'app/2'), { recursive: true });
  await writeFile(join(elsewhere, 'app/2/JobParameters.json'), 'not yours');
  // An earlier job had the user's home mounted and made its Jobs folder a link out of the storage.
  await symlink(elsewhere, join(root, 'home/alice/Jobs'));
  return { storage: directoryStorage(root), root, elsewhere };
}

test('a job folder is not created through a symlink in the user’s drive', async (t) => {
  const { storage, elsewhere } = await planted(t);
  await assert.rejects(
    storage.ensureFolder('/home/alice/Jobs/app/1'),
    /Jobs in \/home\/alice\/Jobs\/app\/1 is not a folder/,
  );
  assert.deepEqual(await readdir(join(elsewhere, 'app')), ['2']);
});

test('JobParameters.json is not written through a symlink on its way', async (t) => {
  const { storage, elsewhere } = await planted(t);
  await assert.rejects(storage.writeFile('/home/alice/Jobs/app/2/JobParameters.json', '{}'), /not a folder/);
  assert.equal(await readFile(join(elsewhere, 'app/2/JobParameters.json'), 'utf8'), 'not yours');
});

test('a job folder and its parameters are written where the path says', async (t) => {
  const { storage, root } = await planted(t);
  await storage.ensureFolder('/home/alice/Work/app/3');
  await storage.writeFile('/home/alice/Work/app/3/JobParameters.json', '{"a":1}');
  await storage.writeFile('/home/alice/Work/app/3/JobParameters.json', '{"a":2}');
  assert.equal(await readFile(join(root, 'home/alice/Work/app/3/JobParameters.json'), 'utf8'), '{"a":2}');
  assert.deepEqual(await readdir(join(root, 'home/alice/Work/app/3')), ['JobParameters.json']);
});
