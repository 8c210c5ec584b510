import { mkdir, realpath, rename, stat, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { normalisePath } from '../model/paths.ts';
import type { EntryKind, InputStorage, JobStorage } from './job-storage.ts';

/**
 * Storage ("UCloud/Storage") backed by one directory: the drive path `/home/alice/x` is
 * `<root>/home/alice/x`. Paths are normalised first, so nothing escapes the root.
 */
export function directoryStorage(
  root: string,
): JobStorage & InputStorage & { resolve(path: string): string } {
  const resolve = (path: string): string => {
    const normalised = normalisePath(path);
    if (normalised === undefined) throw new Error(`not a storage path: ${path}`);
    return join(root, normalised);
  };
  /** The real path, or undefined when nothing is there (a dangling link included). */
  const real = async (path: string): Promise<string | undefined> => {
    try {
      return await realpath(path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw e;
    }
  };
  return {
    resolve,
    async ensureFolder(path) {
      await mkdir(resolve(path), { recursive: true });
    },
    async writeFile(path, content) {
      // Write beside, then rename: a crash never leaves half a file.
      const target = resolve(path);
      const temporary = `${target}.${process.pid}.tmp`;
      await writeFile(temporary, content);
      await rename(temporary, target);
    },
    async entryKind(path, drive): Promise<EntryKind> {
      // Checked after resolving every link: the job mounts what the links lead to.
      const [target, driveRoot] = await Promise.all([real(resolve(path)), real(resolve(drive))]);
      if (target === undefined || driveRoot === undefined) return 'missing';
      if (target !== driveRoot && !target.startsWith(`${driveRoot}${sep}`)) return 'outside';
      const stats = await stat(target);
      return stats.isFile() ? 'file' : stats.isDirectory() ? 'folder' : 'other';
    },
  };
}
