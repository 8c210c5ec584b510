import assert from 'node:assert/strict';
import {
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { directoryStorage } from '../src/storage/directory.ts';
import { openFolder, StorageError, writeNewFile } from '../src/storage/folders.ts';
import { needs } from './support/local-tools.ts';

const asRoot = await needs('dd');

async function storage(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-storage-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('a job folder reached through a symlink is refused, and nothing is created where it points', async (t) => {
  const root = await storage(t);
  const elsewhere = await storage(t);
  await mkdir(join(root, 'home/alice'), { recursive: true });
  await symlink(elsewhere, join(root, 'home/alice/Jobs'));
  await assert.rejects(
    openFolder(root, 'home/alice/Jobs/1', { create: true }),
    /Jobs in home\/alice\/Jobs\/1 is not a folder/,
  );
  await assert.rejects(lstat(join(elsewhere, '1')), { code: 'ENOENT' });
  await assert.rejects(openFolder(root, 'home/../../etc', { create: true }), /leaves the storage/);
});

test('missing folders are made, owned like the folder above them', asRoot, async (t) => {
  const root = await storage(t);
  await mkdir(join(root, 'home/bob'), { recursive: true });
  await chown(join(root, 'home/bob'), 11042, 11042);
  const folder = await openFolder(root, 'home/bob/Jobs/7', { create: true });
  await folder.close();
  assert.equal((await stat(join(root, 'home/bob/Jobs/7'))).uid, 11042);
});

test(
  'a new file is written as the folder owner, never over an existing name or through a symlink',
  asRoot,
  async (t) => {
    const root = await storage(t);
    const victim = join(await storage(t), 'victim');
    await writeFile(victim, 'original');
    await mkdir(join(root, 'job'));
    await chown(join(root, 'job'), 11042, 11042);
    await symlink(victim, join(root, 'job/planted'));
    const folder = await openFolder(root, 'job', { create: true });
    t.after(() => folder.close());
    assert.equal(await writeNewFile(folder, 'planted', Readable.from(['x'])), false);
    assert.equal(await readFile(victim, 'utf8'), 'original');
    assert.equal(await writeNewFile(folder, 'fresh', Readable.from(['hello'])), true);
    assert.equal(await readFile(join(root, 'job/fresh'), 'utf8'), 'hello');
    assert.equal((await stat(join(root, 'job/fresh'))).uid, 11042);
    assert.equal(await writeNewFile(folder, 'fresh', Readable.from(['again'])), false);
    assert.equal(await readFile(join(root, 'job/fresh'), 'utf8'), 'hello');
  },
);

test("in a folder of the server's own user, a new file is written in place, never over a name or through a symlink", async (t) => {
  const root = await storage(t);
  const victim = join(await storage(t), 'victim');
  await writeFile(victim, 'original');
  await mkdir(join(root, 'job'));
  await symlink(victim, join(root, 'job/planted'));
  await symlink(join(root, 'nowhere'), join(root, 'job/dangling'));
  const folder = await openFolder(root, 'job', { create: true });
  t.after(() => folder.close());
  assert.equal(await writeNewFile(folder, 'planted', Readable.from(['x'])), false);
  assert.equal(await readFile(victim, 'utf8'), 'original');
  assert.equal(await writeNewFile(folder, 'dangling', Readable.from(['x'])), false);
  await assert.rejects(lstat(join(root, 'nowhere')), { code: 'ENOENT' });
  assert.equal(await writeNewFile(folder, 'fresh', Readable.from(['hello', Buffer.from(' world')])), true);
  assert.equal(await readFile(join(root, 'job/fresh'), 'utf8'), 'hello world');
  assert.equal(await writeNewFile(folder, 'fresh', Readable.from(['again'])), false);
  assert.equal(await readFile(join(root, 'job/fresh'), 'utf8'), 'hello world');
});

test("a job folder made on the folders' thread: missing folders made, the file written, a symlink on the way refused", async (t) => {
  const root = await storage(t);
  const elsewhere = await storage(t);
  const drive = directoryStorage(root);
  const files = [{ name: 'JobParameters.json', content: '{"jobId":"7"}\n' }];
  await Promise.all([
    drive.makeFolderWith!('/home/alice/Jobs/App/7', files),
    drive.makeFolderWith!('/home/alice/Jobs/App/8', files),
  ]);
  assert.equal(
    await readFile(join(root, 'home/alice/Jobs/App/7/JobParameters.json'), 'utf8'),
    '{"jobId":"7"}\n',
  );
  assert.deepEqual(await readdir(join(root, 'home/alice/Jobs/App/8')), ['JobParameters.json']);
  // Made again (a retried creation): the file is replaced, never written through.
  await drive.makeFolderWith!('/home/alice/Jobs/App/7', [{ name: 'JobParameters.json', content: 'again' }]);
  assert.equal(await readFile(join(root, 'home/alice/Jobs/App/7/JobParameters.json'), 'utf8'), 'again');

  await mkdir(join(root, 'home/bob'), { recursive: true });
  await symlink(elsewhere, join(root, 'home/bob/Jobs'));
  await assert.rejects(drive.makeFolderWith!('/home/bob/Jobs/App/1', files), (e: Error) => {
    assert.ok(e instanceof StorageError);
    assert.equal(e.code, 'ENOTDIR');
    assert.match(e.message, /Jobs in \/home\/bob\/Jobs\/App\/1 is not a folder/);
    return true;
  });
  assert.deepEqual(await readdir(elsewhere), []);
  await symlink(join(elsewhere, 'victim'), join(root, 'home/alice/Jobs/App/7/planted'));
  await drive.makeFolderWith!('/home/alice/Jobs/App/7', [{ name: 'planted', content: 'x' }]);
  await assert.rejects(lstat(join(elsewhere, 'victim')), { code: 'ENOENT' });
  assert.equal(await readFile(join(root, 'home/alice/Jobs/App/7/planted'), 'utf8'), 'x');
});

test("one batch of job folders on the folders' thread: the folder above shared, a symlink among them refused, no descriptor left open", async (t) => {
  const root = await storage(t);
  const elsewhere = await storage(t);
  const drive = directoryStorage(root);
  const files = (id: number) => [{ name: 'JobParameters.json', content: `{"jobId":"${id}"}\n` }];
  await drive.makeFolderWith!('/home/dan/Jobs/App/0', files(0));
  // The descriptors of this process (its threads') open on something in the storage.
  const open = async () => {
    const links = await Promise.all(
      (await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')),
    );
    return links.filter((l) => l.startsWith(root));
  };
  await mkdir(join(root, 'home/erin/Jobs'), { recursive: true });
  await symlink(elsewhere, join(root, 'home/erin/Jobs/App'));
  // Made in one turn of the event loop: one message to the thread.
  const made = await Promise.allSettled([
    ...[1, 2, 3].map((id) => drive.makeFolderWith!(`/home/dan/Jobs/App/${id}`, files(id))),
    drive.makeFolderWith!('/home/erin/Jobs/App/1', files(1)),
    drive.makeFolderWith!('/home/dan/Jobs/Other/4', files(4)),
  ]);
  assert.deepEqual(
    made.map((m) => m.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  );
  assert.match(
    String((made[3] as PromiseRejectedResult).reason),
    /App in \/home\/erin\/Jobs\/App\/1 is not a folder/,
  );
  assert.deepEqual(await readdir(elsewhere), []);
  for (const id of [1, 2, 3]) {
    assert.equal(
      await readFile(join(root, `home/dan/Jobs/App/${id}/JobParameters.json`), 'utf8'),
      `{"jobId":"${id}"}\n`,
    );
  }
  assert.deepEqual(await readdir(join(root, 'home/dan/Jobs/Other/4')), ['JobParameters.json']);
  assert.deepEqual(await open(), [], 'descriptors left open by the thread');
});

test(
  "a job folder of another owner made on the folders' thread: made as that owner, the file written as that owner",
  asRoot,
  async (t) => {
    const root = await storage(t);
    await mkdir(join(root, 'home/carol'), { recursive: true });
    await chown(join(root, 'home/carol'), 11043, 11043);
    await directoryStorage(root).makeFolderWith!('/home/carol/Jobs/App/3', [
      { name: 'JobParameters.json', content: '{}\n' },
    ]);
    assert.equal((await stat(join(root, 'home/carol/Jobs/App/3'))).uid, 11043);
    const written = await stat(join(root, 'home/carol/Jobs/App/3/JobParameters.json'));
    assert.equal(written.uid, 11043);
    assert.equal(await readFile(join(root, 'home/carol/Jobs/App/3/JobParameters.json'), 'utf8'), '{}\n');
  },
);
