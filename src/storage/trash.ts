import { type FileHandle, lstat, open, readdir, rmdir, unlink } from 'node:fs/promises';
import type { Clock, Timer } from '../model/clock.ts';
import { at, DIRECTORY, openFolder, StorageError } from './folders.ts';

/**
 * Emptying the drives' Trash folders, on request and after an age. Deletion goes through open
 * folder descriptors and never follows a link: a job that swaps a folder of its drive for a link
 * to elsewhere, while it is being deleted, gets only the link deleted.
 */

/** What an emptying removed: entries directly in the Trash, and the bytes of the files below them. */
export interface Emptied {
  entries: number;
  bytes: number;
}

/** The Trash folder of a drive (`/home/alice/Trash`), where `files rm` moves things. */
export const TRASH = 'Trash';

/** How long an entry stays in a Trash by default (`storage.trashDays`). */
export const DEFAULT_TRASH_DAYS = 30;
const DAY_MS = 86_400_000;

/** How often the drives' Trash folders are looked at for entries past their age. */
export const PURGE_INTERVAL_MS = 3_600_000;

/**
 * Removes the entries of `<drive>/Trash` below `root`; with `before`, only those put there (their
 * ctime: moving an entry changes it) before that instant. A drive without a Trash has nothing.
 */
export async function emptyTrash(root: string, drive: string, before?: number): Promise<Emptied> {
  const trash = await openFolder(root, `${drive}/${TRASH}`, { create: false }).catch((e: unknown) => {
    if (e instanceof StorageError && e.code === 'ENOENT') return undefined;
    throw e;
  });
  const emptied = { entries: 0, bytes: 0 };
  if (trash === undefined) return emptied;
  try {
    for (const name of await readdir(`/proc/self/fd/${trash.fd}`)) {
      const s = await lstat(at(trash, name)).catch(() => undefined);
      if (s === undefined || (before !== undefined && s.ctimeMs >= before)) continue;
      emptied.bytes += await remove(trash, name);
      emptied.entries++;
    }
  } finally {
    await trash.close();
  }
  return emptied;
}

/** Removes `name` in `dir`, a folder with all below it; answers the bytes of the files removed. */
async function remove(dir: FileHandle, name: string): Promise<number> {
  const path = at(dir, name);
  const s = await lstat(path);
  if (!s.isDirectory()) {
    await unlink(path);
    return s.isFile() ? s.size : 0;
  }
  // A folder swapped for a link since the lstat fails to open (O_NOFOLLOW): only the link goes.
  const folder = await open(path, DIRECTORY).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ELOOP' || e.code === 'ENOTDIR') return undefined;
    throw e;
  });
  if (folder === undefined) {
    await unlink(path);
    return 0;
  }
  let bytes = 0;
  try {
    for (const child of await readdir(`/proc/self/fd/${folder.fd}`)) bytes += await remove(folder, child);
  } finally {
    await folder.close();
  }
  await rmdir(path);
  return bytes;
}

/** Every drive below `root`: /home/<user> and /projects/<id>. */
async function drives(root: string): Promise<string[]> {
  const found: string[] = [];
  for (const kind of ['home', 'projects']) {
    const names = await readdir(`${root}/${kind}`).catch(() => [] as string[]);
    found.push(...names.map((name) => `/${kind}/${name}`));
  }
  return found;
}

export interface TrashPurgeOptions {
  root: string;
  /** How many days an entry stays in a Trash before it is deleted. */
  days: number;
  clock: Clock;
  log?: { info(o: object, msg: string): void; error(o: object, msg: string): void };
}

/** Deletes, every hour, what has been in a drive's Trash for longer than `days`. */
export function trashPurge(o: TrashPurgeOptions) {
  let timer: Timer | undefined;
  let stopped = false;
  let pass: Promise<void> = Promise.resolve();
  async function purge(): Promise<Emptied> {
    const total = { entries: 0, bytes: 0 };
    const before = o.clock.now() - o.days * DAY_MS;
    for (const drive of await drives(o.root)) {
      const emptied = await emptyTrash(o.root, drive, before).catch((err: unknown) => {
        o.log?.error({ err, drive }, 'purging the trash failed');
        return { entries: 0, bytes: 0 };
      });
      total.entries += emptied.entries;
      total.bytes += emptied.bytes;
    }
    if (total.entries > 0) o.log?.info(total, 'purged old entries of the drives’ trash');
    return total;
  }
  const tick = () => {
    pass = purge()
      .then(() => undefined)
      .finally(() => {
        if (!stopped) timer = o.clock.setTimeout(tick, PURGE_INTERVAL_MS);
      });
  };
  return {
    purge,
    start() {
      timer = o.clock.setTimeout(tick, 0);
    },
    async stop() {
      stopped = true;
      timer?.cancel();
      timer = undefined;
      await pass;
    },
  };
}
