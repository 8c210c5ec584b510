import { closeSync, constants, fstatSync, openSync } from 'node:fs';

/** Linux's O_PATH: a descriptor that names a file without opening its contents. */
const O_PATH = 0o10000000;
// Node opens every file close-on-exec.
const FLAGS = O_PATH | constants.O_NOFOLLOW;

/**
 * A descriptor (O_PATH) of `path`, resolved one component at a time relative to the previous
 * folder's descriptor without following a symlink anywhere (Node has no openat: opening
 * /proc/self/fd/N/name resolves `name` relative to N). A job can plant symlinks in its own folder;
 * what the server binds on its behalf is then refused instead of redirected. The caller closes it.
 * Synchronous: a few microseconds of system calls, where the thread pool would add a hop per call.
 */
export function openWithoutSymlinks(path: string): number {
  if (!path.startsWith('/')) throw new Error(`${path} is not an absolute path`);
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new Error(`${path}: '..' is not allowed`);
  let current = openSync('/', FLAGS);
  try {
    for (const [i, part] of parts.entries()) {
      let next: number;
      try {
        next = openSync(`/proc/self/fd/${current}/${part}`, FLAGS);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`${path} does not exist`);
        throw error;
      }
      closeSync(current);
      current = next;
      if (fstatSync(current).isSymbolicLink()) {
        throw new Error(`${path} is not used: /${parts.slice(0, i + 1).join('/')} is a symlink`);
      }
    }
    return current;
  } catch (error) {
    closeSync(current);
    throw error;
  }
}
