import { lstat, readdir, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { ContainerSpec } from './runtime.ts';

/** A host file or folder that appears at `target` in the container. */
export interface Placement {
  source: string;
  target: string;
  readOnly: boolean;
}

export interface SandboxOptions {
  hostname: string;
  shmBytes: number;
  /**
   * True when bubblewrap runs as root: it sets the sandbox up with root's access to every bound
   * path, and a non-root container then drops to its uid inside (see `dropInside`). False when
   * ucompute is not root: bubblewrap runs in a user namespace as the container's user.
   */
  privileged: boolean;
}

/** Kubernetes' default /dev/shm size. */
export const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;

/**
 * Capabilities a root container keeps, Docker's default set without NET_RAW (raw sockets could
 * forge another pod's address and defeat the per-pair network rules).
 */
const ROOT_CAPABILITIES = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

/** Top-level folders the sandbox provides itself instead of taking them from the root folder. */
const PROVIDED = new Set(['proc', 'dev', 'tmp', 'run']);

async function lstatOrNull(path: string) {
  try {
    return await lstat(path);
  } catch {
    return null;
  }
}

/**
 * The deepest existing real folder above `target` in `root`, when `target` itself is missing: the
 * root folder is bound read-only, so a mount point can only be created in a tmpfs copy of that folder.
 */
async function folderToMirror(root: string, target: string): Promise<string | null> {
  if (await lstatOrNull(join(root, target))) return null;
  let folder = posix.dirname(target);
  while (folder !== '/') {
    const stat = await lstatOrNull(join(root, folder));
    if (stat?.isDirectory()) return folder;
    folder = posix.dirname(folder);
  }
  return '/';
}

/** Folders above `target` that the root folder lacks, outermost first. */
async function missingFolders(root: string, target: string): Promise<string[]> {
  const missing: string[] = [];
  for (let folder = posix.dirname(target); folder !== '/'; folder = posix.dirname(folder)) {
    if (await lstatOrNull(join(root, folder))) break;
    missing.unshift(folder);
  }
  return missing;
}

/** Arguments that make `folder` a tmpfs holding read-only binds of everything the root folder has there. */
async function mirrorArgs(root: string, folder: string): Promise<string[]> {
  const args = folder === '/' ? [] : ['--tmpfs', folder];
  for (const entry of await readdir(join(root, folder), { withFileTypes: true })) {
    if (folder === '/' && PROVIDED.has(entry.name)) continue;
    const source = join(root, folder, entry.name);
    const target = posix.join(folder, entry.name);
    if (entry.isSymbolicLink()) args.push('--symlink', await readlink(source), target);
    else args.push('--ro-bind', source, target);
  }
  return args;
}

const depth = (path: string) => path.split('/').filter(Boolean).length;

/**
 * The bubblewrap argv (without the command) for a container: the root folder read-only, private
 * /proc, /dev, /tmp, /run and /dev/shm, the mounts and files, its working directory and hostname.
 * Environment and user are set by the caller, around bubblewrap.
 */
export async function bwrapArgs(
  bwrap: string,
  container: ContainerSpec,
  placements: readonly Placement[],
  options: SandboxOptions,
): Promise<string[]> {
  const root = rootFolder(container);
  const ordered = [...placements].sort((a, b) => depth(a.target) - depth(b.target));
  const mirrored = new Set<string>(['/']);
  for (const p of ordered) {
    const folder = await folderToMirror(root, p.target);
    if (folder) mirrored.add(folder);
  }
  // --die-with-parent: the container ends with its command, as with pid 1 in Kubernetes, not when
  // the last daemon it left ends (bubblewrap's init would wait for those, holding the output open).
  const args = [
    bwrap,
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--die-with-parent',
    '--hostname',
    options.hostname,
  ];
  for (const folder of [...mirrored].sort((a, b) => depth(a) - depth(b))) {
    args.push(...(await mirrorArgs(root, folder)));
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp', '--tmpfs', '/run');
  args.push('--perms', '1777', '--size', String(options.shmBytes), '--tmpfs', '/dev/shm');
  for (const p of ordered) {
    // Folders bubblewrap would create on the way are private (0700); an image's folders are 0755.
    for (const folder of await missingFolders(root, p.target)) args.push('--perms', '0755', '--dir', folder);
    args.push(p.readOnly ? '--ro-bind' : '--bind', p.source, p.target);
  }
  // The tmpfs copies stay read-only like the rest of the root folder, once their mount points exist.
  for (const folder of mirrored) args.push('--remount-ro', folder);
  args.push('--chdir', container.workingDir ?? '/');
  if (options.privileged) {
    args.push('--cap-drop', 'ALL');
    // A non-root container keeps only what setpriv needs to become its user; that drops them too.
    const keep = container.uid === 0 ? ROOT_CAPABILITIES : ['CAP_SETUID', 'CAP_SETGID'];
    for (const cap of keep) args.push('--cap-add', cap);
  } else {
    args.push('--unshare-user', '--uid', String(container.uid), '--gid', String(container.gid));
  }
  args.push('--');
  return args;
}

/** The host folder a container's `/` comes from; the host view is the host's root, read-only. */
export const rootFolder = (container: ContainerSpec) =>
  container.root.kind === 'folder' ? container.root.path : '/';

/** Where a file of the container is written on the host, below the pod's folder. */
export const fileSource = (filesDir: string, index: number, path: string) =>
  join(filesDir, `${index}-${path.replaceAll('/', '_')}`);

/** The command that makes a root-started sandbox's process the container's user, in front of its argv. */
export function dropInside(container: ContainerSpec): string[] {
  if (container.uid === 0) return [];
  return ['setpriv', `--reuid=${container.uid}`, `--regid=${container.gid}`, '--clear-groups', '--'];
}
