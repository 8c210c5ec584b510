import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, rmdir, statfs, symlink, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { podDirMode } from './pod/context.ts';

/** statfs type of a tmpfs. */
export const TMPFS_MAGIC = 0x01021994;
/** The host's shared-memory tmpfs, where pods' state files live as root (see podsStateDir). */
const SHM = '/dev/shm';

/** The instance's folder on /dev/shm: named by its state folder, so that a restart finds it. */
export function shmPodsDir(stateDir: string): string {
  const hash = createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 16);
  return join(SHM, `ucompute-pods-${hash}`);
}

/**
 * The folder of pods' records and their containers' state files (pid, exit status, bubblewrap's
 * status; not their output, which is with the job, nor emptyDir volumes, which are on disk). As
 * root, a folder of this instance's on the host's tmpfs /dev/shm, which `<stateDir>/pods` links to:
 * as runc keeps its state in /run. The files live as long as the pods' processes, which a reboot
 * ends too; a restart of ucompute finds them. On disk, each pod allocated and freed about ten
 * inodes, and ext4 without a journal skips, for each inode it allocates, every inode freed in the
 * last 30 s one by one (`recently_deleted`): a burst of short jobs spent a quarter of its CPU there.
 * On disk as before when not root, without a tmpfs /dev/shm, when the instance's name there is not
 * a folder of root's own (anyone can make one first in /dev/shm: a folder or a link of theirs would
 * let them read and change the records root's supervisors act on), or when `<stateDir>/pods` holds
 * an older ucompute's pods.
 */
export async function podsStateDir(stateDir: string, root: boolean): Promise<string> {
  const link = join(stateDir, 'pods');
  const onDisk = async () => {
    await mkdir(link, { recursive: true, mode: podDirMode });
    return link;
  };
  const found = await lstat(link).catch(() => null);
  if (!root || (found?.isDirectory() && (await readdir(link)).length > 0)) return onDisk();
  if ((await statfs(SHM).catch(() => null))?.type !== TMPFS_MAGIC) return onDisk();
  const dir = shmPodsDir(stateDir);
  await mkdir(dir, { mode: podDirMode }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  // lstat: a link is not followed. /dev/shm is sticky, so root's folder cannot be renamed away after.
  const made = await lstat(dir);
  if (!made.isDirectory() || made.uid !== 0) return onDisk();
  await chmod(dir, podDirMode);
  if (found?.isDirectory()) await rmdir(link);
  else if (found) await unlink(link);
  await symlink(dir, link);
  return dir;
}

/** Removes the pods' folder on /dev/shm once no pod is left in it (a restarted ucompute needs the others). */
export async function releasePodsStateDir(stateDir: string, dir: string): Promise<void> {
  const link = join(stateDir, 'pods');
  if (dir === link) return;
  try {
    await rmdir(dir);
    await unlink(link);
  } catch {
    // Pods are left, for the next ucompute; or gone already.
  }
}
