import { lstat, readdir, readlink } from 'node:fs/promises';
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
}

/** Top-level folders the sandbox provides itself instead of taking them from the root folder. */
const PROVIDED = new Set(['proc', 'dev', 'tmp', 'run']);

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
/** Folders of /etc holding denied entries: built entry by entry instead of bound whole. */
const ETC_FILTERED = ['ssh', 'security', 'ssl'];

const deniedInEtc = (relative: string) => ETC_DENIED.some((pattern) => pattern.test(relative));

/** Arguments that show host folder `folder` (a folder of /etc) entry by entry, without what is denied. */
async function filteredFolderArgs(folder: string): Promise<string[]> {
  const args = ['--perms', '0755', '--dir', folder];
  const relativeFolder = posix.relative('/etc', folder);
  for (const name of (await readdir(folder)).sort()) {
    const path = posix.join(folder, name);
    const relative = relativeFolder === '' ? name : `${relativeFolder}/${name}`;
    if (deniedInEtc(relative)) continue;
    const stat = await lstat(path).catch(() => null);
    if (!stat) continue;
    if (stat.isSymbolicLink()) {
      args.push('--symlink', await readlink(path), path);
    } else if ((stat.mode & 0o004) === 0) {
      // Not world-readable: meant for the host's own services.
    } else if (stat.isDirectory() && relativeFolder === '' && ETC_FILTERED.includes(name)) {
      args.push(...(await filteredFolderArgs(path)));
    } else if (stat.isDirectory() || stat.isFile()) {
      args.push('--ro-bind', path, path);
    }
  }
  return args;
}

/**
 * The host userland view: the host's /usr, /bin, /sbin, /lib* read-only, a filtered /etc (only
 * world-readable entries, none of ETC_DENIED), an empty /var with a writable /var/tmp (and /var/run -> /run); nothing else
 * of the host (/root, /home, /srv, /mnt, /opt, the data folder and storage do not exist in it).
 * Built once per runtime: /etc is read when the runtime starts.
 */
export async function hostView(): Promise<RootView> {
  const args: string[] = [];
  for (const name of USERLAND) {
    const path = `/${name}`;
    const stat = await lstat(path).catch(() => null);
    if (stat?.isSymbolicLink()) args.push('--symlink', await readlink(path), path);
    else if (stat?.isDirectory()) args.push('--ro-bind', path, path);
  }
  args.push(...(await filteredFolderArgs('/etc')));
  args.push('--perms', '0755', '--dir', '/var', '--perms', '1777', '--tmpfs', '/var/tmp');
  // As on Debian: /var/run and /var/lock are the private /run.
  args.push('--symlink', '../run', '/var/run', '--symlink', '../run/lock', '/var/lock');
  const built = new Set(['/', '/etc', '/var', ...ETC_FILTERED.map((f) => `/etc/${f}`)]);
  const shown = new Set(args.filter((_, i) => i > 0 && ['--ro-bind', '--symlink'].includes(args[i - 2]!)));
  return {
    hostPath(path) {
      const normal = posix.normalize(path);
      if (normal === '/') return '/';
      const parts = normal.split('/').filter(Boolean);
      if (USERLAND.includes(parts[0]!)) return normal;
      if (parts[0] !== 'etc') return null;
      // Shown when the entry itself or a folder above it is bound (or built) by the view.
      for (let depth = 1; depth <= parts.length; depth++) {
        const prefix = `/${parts.slice(0, depth).join('/')}`;
        if (shown.has(prefix)) return normal;
        if (!built.has(prefix)) return null;
      }
      return normal;
    },
    built,
    args,
  };
}
