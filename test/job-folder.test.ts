import assert from 'node:assert/strict';
import { chown, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { openFolder, writeNewFile } from '../src/storage/folders.ts';
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
