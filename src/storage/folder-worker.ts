import {
  closeSync,
  constants,
  fchownSync,
  fstatSync,
  mkdirSync,
  openSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { parentPort } from 'node:worker_threads';

/**
 * The job folders' worker thread (./folder-thread.ts starts it): a job's folder made and its files
 * written with synchronous calls, off the server's event loop. The same walk as ./folders.ts's
 * openFolder (one name at a time with O_NOFOLLOW below the root, missing folders made as the owner
 * of the folder above them) and the same write (a new name with O_CREAT|O_EXCL|O_NOFOLLOW, then
 * renamed over the file's name). The server's own folders only: a folder of another owner is
 * answered `foreign` once made, and the file is written by the server (./folders.ts's child process).
 * A synchronous call costs a few microseconds here; the same call through the promise API costs the
 * event loop ~100 µs (a job's folder was ~27 % of the leader's CPU, issue 21).
 */

/** One job folder to make (`folder` below `root`) and the files to write into it. */
export interface FolderRequest {
  id: number;
  root: string;
  folder: string;
  files: { name: string; content: string }[];
}

/**
 * Done (`foreign`: the folder is another owner's, its files were not written), or failed (`refused`:
 * a name on the way is missing or no folder, as ./folders.ts's StorageError).
 */
export type FolderAnswer =
  | { id: number; done: true; foreign: boolean }
  | { id: number; done: false; message: string; code: string | undefined; refused: boolean };

const DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const at = (dir: number, name: string) => `/proc/self/fd/${dir}/${name}`;

/** A refusal as ./folders.ts's StorageError says it (message and code). */
class Refused extends Error {
  readonly code: string;
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}

/** `names` below `root`, opened one at a time; at most one descriptor open at any step. */
function openPath(root: string, names: readonly string[], relative: string): number {
  let dir = openSync(root, DIRECTORY);
  for (const name of names) {
    const parent = dir;
    try {
      dir = openChild(parent, name, relative);
    } finally {
      closeSync(parent);
    }
  }
  return dir;
}

/**
 * The folders above the requests' folders, opened for the requests of one message (by root and
 * path) and closed once it is answered: a batch's jobs share theirs (`<drive>/Jobs/<app>`), and the
 * walk to it was five opens through /proc/self/fd per job, most of this thread's time in ha.bench.
 */
type Parents = Map<string, number>;

/** `relative` below `root`, opened one name at a time, its parent taken from `parents` when open. */
function openFolder(root: string, relative: string, parents: Parents): number {
  const names = relative.split('/').filter((n) => n !== '' && n !== '.');
  if (names.includes('..')) throw new Error(`the folder ${relative} leaves the storage`);
  const last = names.pop();
  if (last === undefined) return openPath(root, names, relative);
  const key = `${root}\0${names.join('/')}`;
  let parent = parents.get(key);
  if (parent === undefined) {
    parent = openPath(root, names, relative);
    parents.set(key, parent);
  }
  return openChild(parent, last, relative);
}

/** Folder `name` in `parent`, made (as `parent`'s owner) when missing. */
function openChild(parent: number, name: string, relative: string): number {
  const refused = (e: unknown): never => {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Refused(
      code === 'ELOOP' || code === 'ENOTDIR'
        ? `${name} in ${relative} is not a folder`
        : (e as Error).message,
      code === 'ENOENT' ? 'ENOENT' : 'ENOTDIR',
    );
  };
  try {
    return openSync(at(parent, name), DIRECTORY);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return refused(e);
  }
  const made = makeFolder(parent, name);
  if (made !== undefined) return made;
  try {
    return openSync(at(parent, name), DIRECTORY);
  } catch (e) {
    return refused(e);
  }
}

/** Makes folder `name` in `parent`, owned as `parent`; answers it opened, or undefined if it existed. */
function makeFolder(parent: number, name: string): number | undefined {
  try {
    mkdirSync(at(parent, name), { mode: 0o755 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
    throw e;
  }
  const owner = fstatSync(parent);
  const created = openSync(at(parent, name), DIRECTORY);
  try {
    fchownSync(created, owner.uid, owner.gid);
  } catch (e) {
    closeSync(created);
    throw e;
  }
  return created;
}

/** Written beside, then renamed over the name (never through it): a crash never leaves half a file. */
function writeFile(folder: number, name: string, content: string): void {
  const temporary = `${name}.${process.pid}.tmp`;
  let file: number;
  try {
    file = openSync(at(folder, temporary), NEW_FILE, 0o666);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new Error(`${temporary} exists already`);
    throw e;
  }
  try {
    const bytes = Buffer.from(content);
    for (let written = 0; written < bytes.length; ) written += writeSync(file, bytes, written);
  } finally {
    closeSync(file);
  }
  renameSync(at(folder, temporary), at(folder, name));
}

export function makeJobFolder(request: FolderRequest, parents: Parents = new Map()): FolderAnswer {
  try {
    const folder = openFolder(request.root, request.folder, parents);
    try {
      const owner = fstatSync(folder);
      if (owner.uid !== process.geteuid?.() || owner.gid !== process.getegid?.()) {
        return { id: request.id, done: true, foreign: true };
      }
      for (const file of request.files) writeFile(folder, file.name, file.content);
      return { id: request.id, done: true, foreign: false };
    } finally {
      closeSync(folder);
    }
  } catch (e) {
    const error = e as NodeJS.ErrnoException;
    return {
      id: request.id,
      done: false,
      message: error.message,
      code: error.code,
      refused: e instanceof Refused,
    };
  }
}

// The answer goes after the shared folders are closed: a caller that has its answer finds none of
// the batch's descriptors still open (job-folder.test.ts checks; answering first failed it once).
parentPort?.on('message', (requests: FolderRequest[]) => {
  const parents: Parents = new Map();
  let answers: FolderAnswer[];
  try {
    answers = requests.map((request) => makeJobFolder(request, parents));
  } finally {
    for (const folder of parents.values()) closeSync(folder);
  }
  parentPort!.postMessage(answers);
});
