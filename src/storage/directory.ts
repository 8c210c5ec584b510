import { mkdir, realpath, rename, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { Readable } from 'node:stream';
import { baseName, normalisePath, parentPath } from '../model/paths.ts';
import { at, openFolder, writeNewFile } from './folders.ts';
import type { EntryKind, InputStorage, JobStorage } from './job-storage.ts';

/**
 * Storage ("UCloud/Storage") backed by one directory: the drive path `/home/alice/x` is
 * `<root>/home/alice/x`. Paths are normalised first, so nothing escapes the root.
 */
export function directoryStorage(
  root: string,
): JobStorage & InputStorage & { resolve(path: string): string } {
  const normalised = (path: string): string => {
    const result = normalisePath(path);
    if (result === undefined) throw new Error(`not a storage path: ${path}`);
    return result;
  };
  const resolve = (path: string): string => join(root, normalised(path));
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
    // Both through folders opened without following links (./folders.ts): earlier jobs may have
    // planted symlinks in the user's drives, where the server writes as root.
    async ensureFolder(path) {
      await mkdir(root, { recursive: true }); // The operator's, made on first use.
      await (await openFolder(root, normalised(path), { create: true })).close();
    },
    async writeFile(path, content) {
      const target = normalised(path);
      const folder = await openFolder(root, parentPath(target), { create: false });
      try {
        // Written beside, then renamed over the name (never through it): a crash never leaves half a file.
        const temporary = `${baseName(target)}.${process.pid}.tmp`;
        if (!(await writeNewFile(folder, temporary, Readable.from([content])))) {
          throw new Error(`${parentPath(target)}/${temporary} exists already`);
        }
        await rename(at(folder, temporary), at(folder, baseName(target)));
      } finally {
        await folder.close();
      }
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
