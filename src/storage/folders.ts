import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { type FileHandle, mkdir, open } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * What the server does in storage on a user's or a job's behalf, without following anything a job
 * planted there: a folder is opened one name at a time with O_NOFOLLOW below the storage root
 * (Node has no openat, so `/proc/self/fd/<dir>/<name>` stands in for it), and whatever is written
 * into a job's folder is written by a child process that runs as the folder's owner, through that
 * descriptor (by the server itself when the folder is the server's own).
 */

export const DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** The name `name` in the open folder `dir`, as a path that resolves through the descriptor. */
export const at = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/**
 * The folder `relative` below `root`, opened without following a symlink in any of its names;
 * with `create`, missing folders are created (as the owner of the folder above them).
 */
export async function openFolder(
  root: string,
  relative: string,
  { create }: { create: boolean },
): Promise<FileHandle> {
  const names = relative.split('/').filter((n) => n !== '' && n !== '.');
  if (names.includes('..')) throw new Error(`the folder ${relative} leaves the storage`);
  let dir = await open(root, DIRECTORY);
  try {
    for (const name of names) {
      const parent = dir;
      const refused = (e: NodeJS.ErrnoException) => {
        throw new StorageError(
          e.code === 'ELOOP' || e.code === 'ENOTDIR' ? `${name} in ${relative} is not a folder` : e.message,
          e.code === 'ENOENT' ? 'ENOENT' : 'ENOTDIR',
        );
      };
      try {
        // Opened first: the folders above a job's folder exist, and a mkdir that finds one costs a
        // system call and an error; only a missing one is made (as the owner of its parent).
        dir = await open(at(parent, name), DIRECTORY).catch(async (e: NodeJS.ErrnoException) => {
          if (!create || e.code !== 'ENOENT') return refused(e);
          await makeFolder(parent, name);
          return open(at(parent, name), DIRECTORY).catch(refused);
        });
      } finally {
        await parent.close();
      }
    }
    return dir;
  } catch (error) {
    await dir.close().catch(() => undefined);
    throw error;
  }
}

/** A folder could not be reached: `code` says whether it is missing or not a folder. */
export class StorageError extends Error {
  readonly code: 'ENOENT' | 'ENOTDIR';

  constructor(message: string, code: 'ENOENT' | 'ENOTDIR') {
    super(message);
    this.code = code;
  }
}

/** Makes folder `name` in `parent` unless it exists, owned like `parent`. */
export async function makeFolder(parent: FileHandle, name: string): Promise<void> {
  await mkdir(at(parent, name), { mode: 0o755 }).then(
    async () => {
      const owner = await parent.stat();
      const created = await open(at(parent, name), DIRECTORY);
      await created.chown(owner.uid, owner.gid).finally(() => created.close());
    },
    (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e;
    },
  );
}

/**
 * Writes `content` as a new file `name` in the folder, as the folder's owner: created with
 * O_CREAT|O_EXCL|O_NOFOLLOW (dd's conv=excl, oflag=nofollow), so an existing name or a symlink is
 * never written through. Resolves false when the name exists.
 */
export async function writeNewFile(folder: FileHandle, name: string, content: Readable): Promise<boolean> {
  const owner = await folder.stat();
  // In a folder of the server's own user the child would run as the server: the same open, made
  // here, spares forking the server for every file (5 ms of its CPU per job's folder).
  if (owner.uid === process.geteuid?.() && owner.gid === process.getegid?.()) {
    return writeNewFileHere(folder, name, content);
  }
  const child = spawn(
    'dd',
    [`of=/proc/self/fd/3/${name}`, 'conv=excl', 'oflag=nofollow', 'bs=64K', 'status=none'],
    { stdio: ['pipe', 'ignore', 'pipe', folder.fd], uid: owner.uid, gid: owner.gid },
  );
  let errors = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => {
    errors += text;
  });
  const ended = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  // dd that refused to open its file closes its input: then its own error is the answer.
  const written = pipeline(content, child.stdin!).then(
    () => null,
    (error: Error) => error,
  );
  const [code, readError] = await Promise.all([ended, written]);
  if (code === 0 && readError) throw readError;
  if (code === 0) return true;
  if (errors.includes('File exists')) return false;
  throw new Error(errors.trim().replace(/^dd: /, '') || `dd ended with code ${code}`);
}

const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** writeNewFile with the server's own credentials: the open dd makes, made in this process. */
async function writeNewFileHere(folder: FileHandle, name: string, content: Readable): Promise<boolean> {
  let file: FileHandle;
  try {
    file = await open(at(folder, name), NEW_FILE, 0o666);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    await file.writeFile(content);
  } finally {
    await file.close();
  }
  return true;
}

/** Bytes the folder uses on disk (`du`, in a child: the walk's cost stays off the event loop). */
export async function diskUse(folder: FileHandle): Promise<number> {
  const child = spawn('du', ['-s', '-x', '-B1', '/proc/self/fd/3/.'], {
    stdio: ['ignore', 'pipe', 'ignore', folder.fd],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve());
  });
  // du reports what it could measure even when a file vanished meanwhile (exit status 1).
  const used = Number(out.split('\t')[0]);
  if (!Number.isFinite(used) || out === '') throw new Error('du could not measure the folder');
  return used;
}
