import { lstatSync, type Stats } from 'node:fs';
import { type FileHandle, mkdir, realpath, rename, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { Readable } from 'node:stream';
import { baseName, isInside, normalisePath, parentPath } from '../model/paths.ts';
import { makeJobFolder } from './folder-thread.ts';
import { at, openFolder, writeNewFile } from './folders.ts';
import type { EntryKind, InputStorage, JobStorage } from './job-storage.ts';

/** How long a folder just ensured stays open for a file written into it next. */
const KEPT_MS = 1000;

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
  /** Folders just ensured, still open (by path), each for KEPT_MS at most. */
  const kept = new Map<string, { handle: FileHandle; timer: NodeJS.Timeout }>();
  /** The root (the operator's), made on first use: once made, it is not asked for again. */
  let rootMade: Promise<unknown> | undefined;
  const makeRoot = () => {
    rootMade ??= mkdir(root, { recursive: true }).catch((e: unknown) => {
      rootMade = undefined;
      throw e;
    });
    return rootMade;
  };
  return {
    resolve,
    // Both through folders opened without following links (./folders.ts): earlier jobs may have
    // planted symlinks in the user's drives, where the server writes as root.
    async ensureFolder(path) {
      await makeRoot();
      const folder = normalised(path);
      const handle = await openFolder(root, folder, { create: true });
      // Kept open a moment: a file written into it next (a job's JobParameters.json) needs no
      // second walk from the root (an open and a close per name, the most of a job folder's cost).
      const before = kept.get(folder);
      const timer = setTimeout(() => {
        if (kept.get(folder)?.handle !== handle) return;
        kept.delete(folder);
        void handle.close().catch(() => {});
      }, KEPT_MS).unref();
      kept.set(folder, { handle, timer });
      if (before) {
        clearTimeout(before.timer);
        await before.handle.close().catch(() => {});
      }
    },
    async writeFile(path, content) {
      const target = normalised(path);
      const parent = parentPath(target);
      const found = kept.get(parent);
      if (found) {
        kept.delete(parent);
        clearTimeout(found.timer);
      }
      const folder = found?.handle ?? (await openFolder(root, parent, { create: false }));
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
    // On the folders' thread with synchronous calls (./folder-worker.ts): the same walk and write as
    // ensureFolder + writeFile, without their ~20 promise-based calls on the event loop. A folder of
    // another owner gets its files from writeFile (written as that owner by a child process).
    async makeFolderWith(path, files) {
      await makeRoot();
      const folder = normalised(path);
      if (await makeJobFolder(root, folder, files)) {
        for (const file of files) await this.writeFile(`${folder}/${file.name}`, file.content);
      }
    },
    async entryKind(path, drive): Promise<EntryKind> {
      // Checked after resolving every link: the job mounts what the links lead to. Usually no
      // link lies between the drive and the path, and one lstat per segment from the drive down
      // shows that; only a link found on the way costs resolving both paths. The lstats are made
      // here rather than in the thread pool: handing each over costs several times the call.
      const target = normalisePath(path);
      const driveRoot = normalisePath(drive);
      if (target === undefined || driveRoot === undefined || !isInside(target, driveRoot)) {
        return entryKindThroughLinks(path, drive);
      }
      let step = driveRoot;
      let stats = lstatSync(join(root, step), { throwIfNoEntry: false });
      for (const segment of target.slice(driveRoot.length).split('/').slice(1)) {
        if (stats === undefined || !stats.isDirectory()) break;
        step = `${step}/${segment}`;
        stats = lstatSync(join(root, step), { throwIfNoEntry: false });
      }
      if (stats?.isSymbolicLink()) return entryKindThroughLinks(path, drive);
      return stats === undefined || step !== target ? 'missing' : kindOf(stats);
    },
  };
}
