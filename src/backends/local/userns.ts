import { spawn } from 'node:child_process';
import { mkdir, readFile, readlink, rename, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from './exec.ts';
import { RANGE_SIZE } from './host-names.ts';

/**
 * User namespaces with an id range per owner, as rootless podman and Kubernetes' `hostUsers: false`
 * do: container uid U of an owner whose range starts at host id B runs as host uid B+U, so container
 * root is nobody on the host and one owner's files are not another's.
 */

/** statfs type of the namespace file system (NSFS_MAGIC): a bind-mounted namespace file. */
const NSFS_MAGIC = 0x6e736673;

export interface IdRanges {
  /** The first host id of `owner`'s range; allocated (and recorded) on first use. */
  base(owner: string): Promise<number>;
  /**
   * A file that opens the user namespace mapping container ids 0..65535 to `base`.., owned by host
   * uid base+uid (see `userNamespaceFile`).
   */
  namespaceFile(base: number, uid: number, gid: number): Promise<string>;
  /** Unmounts the namespace files this process used (running containers keep their namespaces). */
  close(): Promise<void>;
}

/** Checks a container's ids fit its range. */
export function checkContainerIds(uid: number, gid: number): void {
  for (const [field, id] of [
    ['uid', uid],
    ['gid', gid],
  ] as const) {
    if (!Number.isInteger(id) || id < 0 || id >= RANGE_SIZE) {
      throw new Error(
        `container ${field} ${id} is outside 0..${RANGE_SIZE - 1}, the ids a container can have here`,
      );
    }
  }
}

/** The host ids an instance holds (see host-registry.ts), as chunks `[first, count]`. */
export interface HostIdChunks {
  readonly chunks: readonly [number, number][];
  /** Claims another chunk when every range of these is taken. */
  more(): Promise<readonly [number, number][]>;
}

/** The first range of `chunks` that no owner has yet, or null. */
export function freeRange(chunks: readonly [number, number][], taken: ReadonlySet<number>): number | null {
  for (const [first, count] of chunks) {
    for (let base = first; base + RANGE_SIZE <= first + count; base += RANGE_SIZE) {
      if (!taken.has(base)) return base;
    }
  }
  return null;
}

/** Owner ranges recorded in `dir`/ranges.json, taken inside the instance's `ids`, and namespace files in `dir`. */
export async function idRanges(dir: string, ids: HostIdChunks): Promise<IdRanges> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'ranges.json');
  const ranges: Record<string, number> = JSON.parse(await readFile(file, 'utf8').catch(() => '{}'));
  let saving = Promise.resolve();
  let chunks = ids.chunks;
  const files = new Map<string, Promise<string>>();
  return {
    async base(owner) {
      const known = ranges[owner];
      if (known !== undefined) return known;
      const taken = new Set(Object.values(ranges));
      let base = freeRange(chunks, taken);
      if (base === null) {
        chunks = await ids.more();
        base = freeRange(chunks, new Set(Object.values(ranges)));
      }
      const again = ranges[owner];
      if (again !== undefined) return again;
      if (base === null) throw new Error(`no host id range left for owner ${owner}`);
      ranges[owner] = base;
      const text = JSON.stringify(ranges);
      // Written whole and renamed, one write after the other: a crash leaves the old or the new list.
      saving = saving.then(async () => {
        await writeFile(`${file}.new`, text, { mode: 0o600 });
        await rename(`${file}.new`, file);
      });
      await saving;
      return base;
    },
    namespaceFile(base, uid, gid) {
      const path = join(dir, `${base}-${uid}-${gid}`);
      let made = files.get(path);
      if (!made) {
        made = userNamespaceFile(path, base, uid, gid).catch((error) => {
          files.delete(path);
          throw error;
        });
        files.set(path, made);
      }
      return made;
    },
    async close() {
      // Lazily: a running supervisor still holds the file open until its bubblewrap has joined.
      for (const path of files.keys()) await run('/usr/bin/umount', ['--lazy', path]).catch(() => undefined);
      files.clear();
    },
  };
}

async function isNamespaceFile(path: string): Promise<boolean> {
  try {
    return (await statfs(path)).type === NSFS_MAGIC;
  } catch {
    return false;
  }
}

/**
 * Makes `path` a bind mount of a user namespace that maps container ids 0..65535 to host ids
 * base.., owned by host uid base+uid. Bubblewrap 0.8 started by that host user with `--userns`
 * then has every capability inside it, and becomes container uid/gid without losing what it needs
 * on the way (it calls setuid before setgid, which fails when the caller is the namespace's root).
 * A file mounted earlier (by this or an earlier process) is reused.
 */
async function userNamespaceFile(path: string, base: number, uid: number, gid: number): Promise<string> {
  if (await isNamespaceFile(path)) return path;
  await writeFile(path, '', { mode: 0o600 });
  const holder = spawn(
    '/usr/bin/setpriv',
    [
      `--reuid=${base + uid}`,
      `--regid=${base + gid}`,
      '--clear-groups',
      '/usr/bin/unshare',
      '-U',
      '/bin/sleep',
      '60',
    ],
    { stdio: 'ignore' },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      holder.once('spawn', resolve);
      holder.once('error', reject);
    });
    const ours = await readlink('/proc/self/ns/user');
    const nsLink = `/proc/${holder.pid}/ns/user`;
    // The holder is in its namespace once unshare has exec'd sleep.
    for (let attempt = 0; ; attempt++) {
      const comm = await readFile(`/proc/${holder.pid}/comm`, 'utf8').catch(() => '');
      if (comm.trim() === 'sleep' && (await readlink(nsLink).catch(() => ours)) !== ours) break;
      if (attempt >= 500) throw new Error(`the user namespace holder for ${path} did not start`);
      await sleep(2);
    }
    await writeFile(`/proc/${holder.pid}/uid_map`, `0 ${base} ${RANGE_SIZE}\n`);
    await writeFile(`/proc/${holder.pid}/gid_map`, `0 ${base} ${RANGE_SIZE}\n`);
    await run('/usr/bin/mount', ['--bind', nsLink, path]);
  } finally {
    holder.kill('SIGKILL');
  }
  return path;
}
