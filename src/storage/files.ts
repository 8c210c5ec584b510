import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readdir, readlink, rename, symlink, unlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ownerDrive } from '../model/owner.ts';
import {
  baseName,
  isInside,
  nameWithSuffix,
  normalisePath,
  parentPath,
  pathProblem,
} from '../model/paths.ts';
import { at, DIRECTORY, makeFolder, openFolder, StorageError } from './folders.ts';
import { bytesAt, QuotaExceeded, quotaProblem, type StorageQuotas } from './quota.ts';
import { type Emptied, emptyTrash, TRASH } from './trash.ts';

/**
 * The files of the drives one user may reach, below the storage root, with the path rules of file
 * parameters: absolute, normalised paths inside one of the drives. Every folder on the way is
 * opened with O_NOFOLLOW (./folders.ts) and the last name is never followed either, so a symlink a
 * job planted in a drive leads nowhere. Whatever the server creates is owned like the folder it is
 * created in, as the local backend owns job folders.
 */

export interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'folder' | 'link' | 'other';
  size: number;
  modifiedAt: number;
}

/** A request the files cannot honour, with the HTTP status it maps to. */
export class FileError extends Error {
  readonly status: 400 | 402 | 404 | 409;

  constructor(status: 400 | 402 | 404 | 409, message: string) {
    super(message);
    this.status = status;
  }
}

/** The drives of a user: their home and those of the projects they belong to. */
export function drivesOf(username: string, projects: readonly string[]): string[] {
  return [
    ownerDrive({ createdBy: username }),
    ...projects.map((project) => ownerDrive({ createdBy: username, project })),
  ];
}

const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
// O_NONBLOCK: a FIFO planted under the name fails (ENXIO) instead of blocking the server.
const WRITE = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export type DriveFiles = ReturnType<typeof driveFiles>;

/** What enters a drive is counted against its owner's quota in `quotas` and refused past it (402). */
export function driveFiles(root: string, drives: readonly string[], quotas: StorageQuotas) {
  const rootBytes = Buffer.byteLength(root);
  /** Refuses (402) unless the drive's owner has room for `adding` bytes (0: is not over its quota). */
  async function room(drive: string, adding = 0): Promise<void> {
    await quotas.check(drive, adding).catch((e: unknown) => {
      throw e instanceof QuotaExceeded ? new FileError(402, e.message) : e;
    });
  }
  /** The normalised path and the drive it lies in; 404 outside the drives, so others' names reveal nothing. */
  function check(path: string, field: string): { path: string; drive: string } {
    const normalised = normalisePath(path);
    if (normalised === undefined) {
      throw new FileError(400, `${field}: must be an absolute path without . or .. segments`);
    }
    const problem = pathProblem(normalised, rootBytes);
    if (problem !== undefined) throw new FileError(400, `${field}: ${problem}`);
    const drive = drives.find((d) => isInside(normalised, d));
    if (drive === undefined) throw new FileError(404, `${normalised} was not found`);
    return { path: normalised, drive };
  }

  /** Like `check`, for changes: the drive itself cannot be moved, copied over or trashed. */
  function checkBelowDrive(path: string, field: string): { path: string; drive: string } {
    const checked = check(path, field);
    if (checked.path === checked.drive)
      throw new FileError(400, `${field}: ${checked.path} is a whole drive`);
    return checked;
  }

  /** The folder `path`, opened name by name without following links; a missing drive is made. */
  async function openPath(path: string, drive: string): Promise<FileHandle> {
    await (await openFolder(root, drive, { create: true })).close();
    return openFolder(root, path, { create: false }).catch((e: unknown) => {
      if (!(e instanceof StorageError)) throw e;
      if (e.code === 'ENOENT') throw new FileError(404, `${path} was not found`);
      throw new FileError(400, e.message);
    });
  }

  async function entryAt(folder: FileHandle, name: string, path: string): Promise<FileEntry> {
    const s = await lstat(at(folder, name)).catch((e: NodeJS.ErrnoException) => {
      throw e.code === 'ENOENT' ? new FileError(404, `${path} was not found`) : e;
    });
    const type = s.isFile() ? 'file' : s.isDirectory() ? 'folder' : s.isSymbolicLink() ? 'link' : 'other';
    return { name, path, type, size: s.size, modifiedAt: Math.round(s.mtimeMs) };
  }

  async function absent(folder: FileHandle, name: string, path: string): Promise<void> {
    const taken = await lstat(at(folder, name)).then(
      () => true,
      (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return false;
        throw e;
      },
    );
    if (taken) throw new FileError(409, `${path} exists already`);
  }

  /** Runs `use` with the parent folder of `path` open. */
  async function inParent<T>(
    checked: { path: string; drive: string },
    use: (parent: FileHandle, name: string) => Promise<T>,
  ): Promise<T> {
    const parent = await openPath(parentPath(checked.path), checked.drive);
    try {
      return await use(parent, baseName(checked.path));
    } finally {
      await parent.close();
    }
  }

  /**
   * A move or copy: both paths below a drive, the target not inside the source, the source there
   * and the target's name free; `act` gets the two parent folders and names. Answers the target.
   */
  async function transfer(
    from: string,
    to: string,
    act: (
      sourceParent: FileHandle,
      sourceName: string,
      targetParent: FileHandle,
      targetName: string,
      drives: { source: string; target: string },
    ) => Promise<void>,
  ): Promise<string> {
    const source = checkBelowDrive(from, 'from');
    const target = checkBelowDrive(to, 'to');
    if (isInside(target.path, source.path))
      throw new FileError(400, `to: ${target.path} lies inside ${source.path}`);
    await inParent(source, (sourceParent, sourceName) =>
      inParent(target, async (targetParent, targetName) => {
        await entryAt(sourceParent, sourceName, source.path);
        await absent(targetParent, targetName, target.path);
        await act(sourceParent, sourceName, targetParent, targetName, {
          source: source.drive,
          target: target.drive,
        });
      }),
    );
    return target.path;
  }

  return {
    async stat(path: string): Promise<FileEntry> {
      const checked = check(path, 'path');
      if (checked.path === checked.drive) {
        const folder = await openPath(checked.path, checked.drive);
        await folder.close();
      }
      return inParent(checked, (parent, name) => entryAt(parent, name, checked.path));
    },

    /** A folder's entries by name, `limit` at a time, starting after the name `after`. */
    async list(
      path: string,
      { limit, after }: { limit: number; after?: string | undefined },
    ): Promise<{ items: FileEntry[]; next: string | null }> {
      const checked = check(path, 'path');
      const folder = await openPath(checked.path, checked.drive);
      try {
        const names = (await readdir(`/proc/self/fd/${folder.fd}`))
          .filter((n) => after === undefined || n > after)
          .sort()
          .slice(0, limit + 1);
        const page = names.slice(0, limit);
        const items = await Promise.all(page.map((n) => entryAt(folder, n, `${checked.path}/${n}`)));
        return { items, next: names.length > limit ? page.at(-1)! : null };
      } finally {
        await folder.close();
      }
    },

    /** The file, open for reading, with its size; the caller closes the handle. */
    async openForReading(path: string): Promise<{ handle: FileHandle; size: number; modifiedAt: number }> {
      const checked = checkBelowDrive(path, 'path');
      return inParent(checked, async (parent, name) => {
        const handle = await open(at(parent, name), READ).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') throw new FileError(404, `${checked.path} was not found`);
          if (e.code === 'ELOOP' || e.code === 'ENXIO')
            throw new FileError(400, `${checked.path} is not a file`);
          throw e;
        });
        const s = await handle.stat();
        if (!s.isFile()) {
          await handle.close();
          throw new FileError(400, `${checked.path} is not a file`);
        }
        return { handle, size: s.size, modifiedAt: Math.round(s.mtimeMs) };
      });
    },

    /**
     * Streams `content` into the file from byte `offset`: 0 starts the file afresh, any other offset
     * continues an upload and must be the file's current size (409 says where to continue).
     */
    async write(path: string, content: Readable, offset: number): Promise<FileEntry> {
      const checked = checkBelowDrive(path, 'path');
      await room(checked.drive);
      return inParent(checked, async (parent, name) => {
        const existed = await lstat(at(parent, name)).then(
          () => true,
          () => false,
        );
        const handle = await open(at(parent, name), WRITE, 0o644).catch((e: NodeJS.ErrnoException) => {
          if (['ELOOP', 'EISDIR', 'ENXIO'].includes(e.code ?? '')) {
            throw new FileError(400, `${checked.path} is not a file`);
          }
          throw e;
        });
        let freed = 0;
        try {
          const [s, owner] = await Promise.all([handle.stat(), parent.stat()]);
          if (!s.isFile()) throw new FileError(400, `${checked.path} is not a file`);
          if (offset > 0 && s.size !== offset) {
            throw new FileError(409, `${checked.path} has ${s.size} bytes: continue at offset ${s.size}`);
          }
          if (s.uid !== owner.uid || s.gid !== owner.gid) await handle.chown(owner.uid, owner.gid);
          if (offset === 0) {
            freed = s.size;
            await handle.truncate(0);
          }
          // Written here rather than piped: the room left is checked before each piece goes to disk.
          const usage = await quotas.usage(checked.drive);
          const room =
            usage.quotaBytes === null ? Number.POSITIVE_INFINITY : usage.quotaBytes - usage.usedBytes + freed;
          let written = 0;
          try {
            // Not destroyed when refused: the request's stream is drained below, so the answer reaches the client.
            for await (const piece of content.iterator({ destroyOnReturn: false })) {
              const chunk = Buffer.from(piece);
              if (written + chunk.length > room) {
                throw new FileError(402, quotaProblem(usage, written + chunk.length - freed) ?? '');
              }
              for (let at = 0; at < chunk.length; ) {
                at += (await handle.write(chunk, at, chunk.length - at, offset + written + at)).bytesWritten;
              }
              written += chunk.length;
            }
          } catch (error) {
            if (!(error instanceof FileError)) {
              // A broken upload keeps what came, to be continued at its size.
              quotas.added(checked.drive, written - freed);
              throw error;
            }
            // Refused whole: what this request wrote goes again, as though it never came.
            content.resume();
            if (existed) await handle.truncate(offset);
            else await unlink(at(parent, name));
            quotas.added(checked.drive, -freed);
            throw error;
          }
          quotas.added(checked.drive, written - freed);
        } finally {
          await handle.close();
        }
        return entryAt(parent, name, checked.path);
      });
    },

    /** Makes the folder and any missing folders above it. */
    async mkdir(path: string): Promise<FileEntry> {
      const checked = check(path, 'path');
      await room(checked.drive);
      const folder = await openFolder(root, checked.path, { create: true }).catch((e: unknown) => {
        throw e instanceof StorageError ? new FileError(400, e.message) : e;
      });
      await folder.close();
      return this.stat(checked.path);
    },

    async move(from: string, to: string): Promise<FileEntry> {
      const target = await transfer(
        from,
        to,
        async (sourceParent, sourceName, targetParent, targetName, d) => {
          // Within a drive nothing enters it; into another drive the bytes count for its owner.
          const bytes = d.source === d.target ? 0 : await bytesAt(sourceParent, sourceName);
          await room(d.target, bytes);
          await rename(at(sourceParent, sourceName), at(targetParent, targetName));
          quotas.added(d.source, -bytes);
          quotas.added(d.target, bytes);
        },
      );
      return this.stat(target);
    },

    async copy(from: string, to: string): Promise<FileEntry> {
      const target = await transfer(
        from,
        to,
        async (sourceParent, sourceName, targetParent, targetName, d) => {
          const bytes = await bytesAt(sourceParent, sourceName);
          await room(d.target, bytes);
          await copyEntry(sourceParent, sourceName, targetParent, targetName);
          quotas.added(d.target, bytes);
        },
      );
      return this.stat(target);
    },

    /** Moves the file or folder into `<drive>/Trash`, under a free name; answers where it went. */
    async trash(path: string): Promise<FileEntry> {
      const checked = checkBelowDrive(path, 'path');
      const trash = `${checked.drive}/${TRASH}`;
      if (isInside(checked.path, trash))
        throw new FileError(400, `path: ${checked.path} is in the trash already`);
      await (await openFolder(root, trash, { create: true })).close();
      const moved = await inParent(checked, async (parent, name) => {
        await entryAt(parent, name, checked.path);
        const bin = await openPath(trash, checked.drive);
        try {
          for (let n = 1; n <= 1000; n++) {
            const candidate = n === 1 ? name : nameWithSuffix(name, ` (${n})`);
            const taken = await lstat(at(bin, candidate)).then(
              () => true,
              () => false,
            );
            if (taken) continue;
            await rename(at(parent, name), at(bin, candidate));
            return `${trash}/${candidate}`;
          }
          throw new FileError(409, `the trash holds 1000 entries named ${name}: empty it first`);
        } finally {
          await bin.close();
        }
      });
      return this.stat(moved);
    },

    /** Deletes for good everything in the Trash of `drive`, one of the caller's drives. */
    async emptyTrash(drive: string): Promise<Emptied> {
      const checked = check(drive, 'drive');
      if (checked.path !== checked.drive)
        throw new FileError(400, `drive: ${checked.path} is not a drive (it lies in ${checked.drive})`);
      const emptied = await emptyTrash(root, checked.drive);
      quotas.forget(checked.drive);
      return emptied;
    },
  };
}

/** Copies a file, a folder (recursively) or a link (as a link), owned like the target's folder. */
async function copyEntry(from: FileHandle, name: string, to: FileHandle, newName: string): Promise<void> {
  const s = await lstat(at(from, name));
  const owner = await to.stat();
  if (s.isSymbolicLink()) {
    await symlink(await readlink(at(from, name)), at(to, newName));
    return;
  }
  if (s.isDirectory()) {
    await makeFolder(to, newName);
    const [source, target] = await Promise.all([
      open(at(from, name), DIRECTORY),
      open(at(to, newName), DIRECTORY),
    ]);
    try {
      for (const child of await readdir(`/proc/self/fd/${source.fd}`)) {
        await copyEntry(source, child, target, child);
      }
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
    return;
  }
  if (!s.isFile()) return;
  const input = await open(at(from, name), READ);
  const output = await open(at(to, newName), WRITE | constants.O_EXCL, 0o644).catch(async (e: unknown) => {
    await input.close();
    throw e;
  });
  try {
    await output.chown(owner.uid, owner.gid);
  } catch (error) {
    await Promise.all([input.close(), output.close()]);
    throw error;
  }
  // The streams close their handles when they end or fail.
  await pipeline(input.createReadStream(), output.createWriteStream());
}
