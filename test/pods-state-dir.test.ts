import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readlink, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { podsStateDir, releasePodsStateDir, shmPodsDir } from '../src/backends/local/pods-state-dir.ts';
import { needs } from './support/local-tools.ts';

/** A state folder of the test's own, and its instance's name on /dev/shm; both removed after. */
async function instance(t: { after(fn: () => Promise<void>): void }) {
  const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-pods-state-'));
  const shm = shmPodsDir(stateDir);
  t.after(async () => {
    await rm(shm, { recursive: true, force: true });
    await rm(stateDir, { recursive: true, force: true });
  });
  return { stateDir, shm, link: join(stateDir, 'pods') };
}

/** A host user that is not root: what anyone on the machine may be. */
const NOBODY = 65534;

describe("pods' state folder on /dev/shm", await needs(), () => {
  test("as root, the instance's own folder on /dev/shm, root's, 0711, linked from the state folder; removed once empty", async (t) => {
    const { stateDir, shm, link } = await instance(t);
    assert.equal(await podsStateDir(stateDir, true), shm);
    const made = await lstat(shm);
    assert.ok(made.isDirectory());
    assert.equal(made.uid, 0);
    assert.equal(made.mode & 0o777, 0o711);
    assert.equal(await readlink(link), shm);
    await releasePodsStateDir(stateDir, shm);
    assert.equal(await lstat(shm).catch(() => null), null);
    assert.equal(await lstat(link).catch(() => null), null);
  });

  test("a folder another user made first at the instance's name on /dev/shm is not used: the pods stay on disk", async (t) => {
    const { stateDir, shm, link } = await instance(t);
    await mkdir(shm);
    await chmod(shm, 0o777);
    await chown(shm, NOBODY, NOBODY);
    assert.equal(await podsStateDir(stateDir, true), link);
    assert.ok((await lstat(link)).isDirectory(), 'the state folder holds the pods itself, not a link');
    const theirs = await stat(shm);
    assert.deepEqual(
      [theirs.uid, theirs.mode & 0o777],
      [NOBODY, 0o777],
      "their folder's owner and mode are untouched",
    );
    assert.deepEqual(await readdir(shm), []);
  });

  test("a link at the instance's name on /dev/shm is not followed: the pods stay on disk", async (t) => {
    const { stateDir, shm, link } = await instance(t);
    // The link points at a folder of root's, so that only the link itself tells it apart.
    const target = await mkdtemp(join(tmpdir(), 'ucompute-pods-target-'));
    t.after(() => rm(target, { recursive: true, force: true }));
    await symlink(target, shm);
    assert.equal(await podsStateDir(stateDir, true), link);
    assert.ok((await lstat(link)).isDirectory(), 'the state folder holds the pods itself, not a link');
    assert.equal(await readlink(shm), target, 'the link is left as it was');
    assert.equal((await stat(target)).mode & 0o777, 0o700, "the link's target is not opened up");
  });

  test('not root: the pods are on disk, in the state folder', async (t) => {
    const { stateDir, shm, link } = await instance(t);
    assert.equal(await podsStateDir(stateDir, false), link);
    assert.equal(await lstat(shm).catch(() => null), null);
  });
});
