import type { Stats } from 'node:fs';
import { lstat, mkdir, realpath, rename, stat, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { isInside, normalisePath } from '../model/paths.ts';
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
  /** `fn`'s answer, or undefined when nothing is there (a dangling link included). */
  const unlessMissing = async <T>(fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw e;
    }
  };
  const kindOf = (stats: Stats): EntryKind =>
    stats.isFile() ? 'file' : stats.isDirectory() ? 'folder' : 'other';
  /** Resolves every link of both paths (a syscall per segment of each, the root's included). */
  const entryKindThroughLinks = async (path: string, drive: string): Promise<EntryKind> => {
    const [target, driveRoot] = await Promise.all([
      unlessMissing(() => realpath(resolve(path))),
      unlessMissing(() => realpath(resolve(drive))),
    ]);
    if (target === undefined || driveRoot === undefined) return 'missing';
    if (target !== driveRoot && !target.startsWith(`${driveRoot}${sep}`)) return 'outside';
    return kindOf(await stat(target));
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
      // Checked after resolving every link: the job mounts what the links lead to. Usually no
      // link lies between the drive and the path, and one lstat per segment from the drive down
      // (made together) shows that; only a link found on the way costs resolving both paths.
      const target = normalisePath(path);
      const driveRoot = normalisePath(drive);
      if (target === undefined || driveRoot === undefined || !isInside(target, driveRoot)) {
        return entryKindThroughLinks(path, drive);
      }
      const below = target.slice(driveRoot.length).split('/').slice(1);
      const steps = [driveRoot, ...below.map((_, i) => `${driveRoot}/${below.slice(0, i + 1).join('/')}`)];
      const found = await Promise.all(steps.map((step) => unlessMissing(() => lstat(join(root, step)))));
      if (found.some((stats) => stats?.isSymbolicLink())) return entryKindThroughLinks(path, drive);
      const last = found.at(-1);
      return found.includes(undefined) || last === undefined ? 'missing' : kindOf(last);
    },
  };
}
