import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  type Stats,
  symlinkSync,
} from 'node:fs';
import { chmod, lstat, mkdir, readdir, readlink, rename, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';

/**
 * What a container sees as `/`: where each of its paths is on the host, and the bubblewrap
 * arguments that build the folders the view makes itself (in bubblewrap's tmpfs root).
 */
export interface RootView {
  /** The host path shown at container path `path`, or null when the view shows nothing there. */
  hostPath(path: string): string | null;
  /** Container folders the view builds in the root tmpfs (`/` at least): mount points can be made there. */
  built: ReadonlySet<string>;
  /** Arguments that build them. */
  args: readonly string[];
  /** Makes a folder for mount points, where the view can (instead of a tmpfs copy of its parent). */
  makeFolder?(folder: string): Promise<void>;
  /** Host folders its arguments bind whole, read-only, at the same place in every container. */
  wholeFolders?: readonly string[];
}

/** Top-level folders the sandbox provides itself instead of taking them from the root folder. */
const PROVIDED = new Set(['proc', 'dev', 'tmp', 'run', 'sys']);

/** An image's root folder: every entry of it, read-only (symlinks as symlinks). */
export async function folderView(root: string): Promise<RootView> {
  const args: string[] = [];
  for (const entry of await readdir(root, { withFileTypes: true })) {
    if (PROVIDED.has(entry.name)) continue;
    const source = join(root, entry.name);
    const target = `/${entry.name}`;
    if (entry.isSymbolicLink()) args.push('--symlink', await readlink(source), target);
    else args.push('--ro-bind', source, target);
  }
  return { hostPath: (path) => join(root, path), built: new Set(['/']), args };
}

/** The host's folders of programs and libraries, shown whole (merged-/usr Debian: most are symlinks). */
const USERLAND = ['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/**
 * Entries of the host's /etc the view never shows, relative to /etc, besides those that are not
 * world-readable: password hashes and their backups (`*-`), ssh host keys, sudo's rules, old
 * passwords, TLS private keys.
 */
const ETC_DENIED = [
  /^shadow/,
  /^gshadow/,
  /-$/,
  /^sudoers/,
  /^ssh\/ssh_host_/,
  /^security\/opasswd/,
  /^ssl\/private/,
];
const deniedInEtc = (relative: string) => ETC_DENIED.some((pattern) => pattern.test(relative));

/** An entry of /etc the view shows: its path relative to /etc, what it is, and its mode. */
interface EtcEntry {
  relative: string;
  kind: 'folder' | 'file' | 'symlink';
  mode: number;
  /** What identifies its content. */
  stamp: string;
}

/**
 * Entries of /etc the view shows, depth first (a folder before what it holds). Synchronous, as
 * the copy: done once as the runtime starts, it costs a third of the CPU of ~1,400 awaited calls.
 */
function shownEtcEntries(): EtcEntry[] {
  const shown: EtcEntry[] = [];
  function walk(relative: string) {
    for (const name of readdirSync(join('/etc', relative)).sort()) {
      const child = relative === '' ? name : `${relative}/${name}`;
      if (deniedInEtc(child)) continue;
      const stat = lstatOrNull(join('/etc', child));
      if (!stat || (!stat.isSymbolicLink() && (stat.mode & 0o004) === 0)) continue;
      const kind = stat.isSymbolicLink()
        ? 'symlink'
        : stat.isDirectory()
          ? 'folder'
          : stat.isFile()
            ? 'file'
            : null;
      if (kind === null) continue;
      shown.push({
        relative: child,
        kind,
        mode: stat.mode & 0o7777,
        stamp: `${stat.mode}:${stat.size}:${stat.mtimeMs}`,
      });
      if (kind === 'folder') walk(child);
    }
  }
  walk('');
  return shown;
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/**
 * Copies `entries` of /etc into `copy`, as they are (modes, symlinks verbatim). The walk has seen
 * every entry: each is made directly (fs.cp walked and checked /etc again, about a CPU second for
 * Debian's 1,400 entries, at every runtime's first start), synchronously (half the CPU of a
 * promise per file). copyFileSync gives the copy its source's mode (libuv sets it).
 */
function copyEtc(entries: EtcEntry[], copy: string): void {
  mkdirSync(copy);
  for (const { relative, kind, mode } of entries) {
    const source = join('/etc', relative);
    const target = join(copy, relative);
    if (kind === 'folder') {
      mkdirSync(target);
      chmodSync(target, mode);
    } else if (kind === 'symlink') symlinkSync(readlinkSync(source), target);
    else copyFileSync(source, target);
  }
}

/**
 * A copy of the host's /etc without what the view never shows (not world-readable, or denied),
 * under `dir`: one bind instead of one per entry (bubblewrap's binds each cost a scan of the mount
 * table). Named by what it holds: made again when /etc changed, reused otherwise; a copy running
 * containers still use is left in place.
 */
async function filteredEtc(dir: string): Promise<string> {
  const entries = shownEtcEntries();
  const hash = createHash('sha256');
  for (const e of entries) hash.update(`${e.relative}\0${e.stamp}\0`);
  const copy = join(dir, `etc-${hash.digest('hex').slice(0, 16)}`);
  if (await lstat(copy).catch(() => null)) return copy;
  await mkdir(dir, { recursive: true, mode: 0o711 });
  const partial = `${copy}.${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  copyEtc(entries, partial);
  await chmod(partial, 0o755);
  await rename(partial, copy);
  return copy;
}

/**
 * The host userland view: the host's /usr, /bin, /sbin, /lib* read-only, a filtered copy of /etc
 * (only world-readable entries, none of ETC_DENIED), an empty /var with a writable /var/tmp (and
 * /var/run -> /run); nothing else of the host (/root, /home, /srv, /mnt, /opt, the data folder and
 * storage do not exist in it). Built once per runtime, in `dir`: /etc is read when the runtime
 * starts. Folders containers mount things in below /etc (e.g. /etc/volcano) are made, empty, in
 * the copy.
 */
export async function hostView(dir: string): Promise<RootView> {
  const args: string[] = [];
  const whole: string[] = [];
  for (const name of USERLAND) {
    const path = `/${name}`;
    const stat = await lstat(path).catch(() => null);
    if (stat?.isSymbolicLink()) args.push('--symlink', await readlink(path), path);
    else if (stat?.isDirectory()) {
      args.push('--ro-bind', path, path);
      whole.push(path);
    }
  }
  const etc = await filteredEtc(dir);
  args.push('--ro-bind', etc, '/etc');
  whole.push(etc);
  args.push('--perms', '0755', '--dir', '/var', '--perms', '1777', '--tmpfs', '/var/tmp');
  // As on Debian: /var/run and /var/lock are the private /run.
  args.push('--symlink', '../run', '/var/run', '--symlink', '../run/lock', '/var/lock');
  const inEtc = (path: string) => {
    const relative = posix.relative('/etc', posix.normalize(path));
    return relative.startsWith('..') ? null : relative;
  };
  return {
    hostPath(path) {
      const normal = posix.normalize(path);
      if (normal === '/') return '/';
      const top = normal.split('/')[1]!;
      if (USERLAND.includes(top)) return normal;
      const relative = inEtc(normal);
      return relative === null ? null : join(etc, relative);
    },
    built: new Set(['/', '/var']),
    args,
    wholeFolders: whole,
    async makeFolder(folder) {
      const relative = inEtc(folder);
      if (relative) await mkdir(join(etc, relative), { recursive: true, mode: 0o755 });
    },
  };
}
