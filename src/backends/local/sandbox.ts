import { lstatSync } from 'node:fs';
import { readdir, readlink, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { RootView } from './host-view.ts';
import type { ContainerSpec } from './runtime.ts';
import { type SysView, topologyViews } from './sys-views.ts';

/** A host file or folder that appears at `target` in the container. */
export interface Placement {
  source: string;
  target: string;
  readOnly: boolean;
}

/**
 * A placement whose source bubblewrap has open at descriptor `fd` (O_PATH, opened without
 * following symlinks): what it binds is that descriptor's file or nothing.
 */
export type OpenPlacement = Placement & { fd: number };

export interface SandboxOptions {
  hostname: string;
  shmBytes: number;
  view: RootView;
  /**
   * How bubblewrap becomes the container's user. `userns`: it joins the user namespace open at
   * `fd` (the owner's id range, see userns.ts), started by root as the container user's host ids;
   * `unshare`: it makes its own namespace as ucompute's own user (not root: ids are not remapped).
   */
  user: { kind: 'userns'; fd: number } | { kind: 'unshare' };
  /** The compiled seccomp program, open at this descriptor. */
  seccompFd: number;
  /** What of /sys it sees, read-only (sys-views.ts); /sys holds nothing else. */
  sys: readonly SysView[];
  /** The folder its /sys is, with the views' mount points (prepareSysRoot). */
  sysRoot: string;
  /**
   * Where bubblewrap starts, `sysRoot` is a prepared mount with the topology's views bound in it
   * (prepared-mounts.ts): bound with it, not one by one (unless /sys has to be a tmpfs).
   */
  sysRootPrepared: boolean;
}

/** Kubernetes' default /dev/shm size. */
export const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;

/**
 * Capabilities a root container keeps, inside its user namespace only: Docker's default set
 * without NET_RAW (raw sockets could forge another pod's address and defeat the per-pair network
 * rules).
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

/** What a container's processes keep, its command and every shell opened in it alike. */
export const containerCapabilities = (uid: number): readonly string[] => (uid === 0 ? ROOT_CAPABILITIES : []);

/** Asked for every placement of every container: synchronous, as the pods' small files are (pod/pod.ts). */
function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

function existsIn(view: RootView, path: string) {
  const host = view.hostPath(path);
  return host !== null && lstatOrNull(host) !== null;
}

/**
 * The deepest folder above `target` the view takes from the host, when `target` itself is missing:
 * it is bound read-only, so a mount point can only be created in a tmpfs copy of that folder. Null
 * when none is needed (the target exists, or its nearest folder is one the view builds).
 */
async function folderToMirror(view: RootView, target: string): Promise<string | null> {
  if (existsIn(view, target)) return null;
  for (let folder = posix.dirname(target); ; folder = posix.dirname(folder)) {
    if (view.built.has(folder)) return null;
    const host = view.hostPath(folder);
    const stat = host === null ? null : lstatOrNull(host);
    if (stat?.isDirectory()) return folder;
  }
}

/** Folders above `target` that the view lacks, outermost first. */
async function missingFolders(view: RootView, target: string): Promise<string[]> {
  const missing: string[] = [];
  for (let folder = posix.dirname(target); folder !== '/'; folder = posix.dirname(folder)) {
    if (view.built.has(folder) || existsIn(view, folder)) break;
    missing.unshift(folder);
  }
  return missing;
}

/**
 * Arguments that make `folder` a tmpfs holding read-only binds of everything the view has there,
 * with the folder's own permissions (an image's /root stays 0700).
 */
async function mirrorArgs(view: RootView, folder: string): Promise<string[]> {
  const host = view.hostPath(folder)!;
  const mode = ((await stat(host)).mode & 0o7777).toString(8).padStart(4, '0');
  const args = ['--perms', mode, '--tmpfs', folder];
  for (const entry of await readdir(host, { withFileTypes: true })) {
    const source = join(host, entry.name);
    const target = posix.join(folder, entry.name);
    if (entry.isSymbolicLink()) args.push('--symlink', await readlink(source), target);
    else args.push('--ro-bind', source, target);
  }
  return args;
}

const depth = (path: string) => path.split('/').filter(Boolean).length;

/**
 * /sys: `root` (empty folders, see prepareSysRoot) bound read-only, and `views` bound read-only
 * in it: each is a mount that bubblewrap makes for every container, so one bind of a prepared
 * folder, not a tmpfs with folders made in it and then remounted read-only. `prepared`: the
 * topology's views are in `root` already (a recursive bind brings them). When a placement goes
 * below /sys (its mount point has to be made there), /sys is that tmpfs, read-only once the
 * placements are bound (`remount`), with every view bound in it.
 */
function sysArgs(root: string, all: readonly SysView[], placedBelow: boolean, prepared: boolean) {
  const args = placedBelow ? ['--perms', '0755', '--tmpfs', '/sys'] : ['--ro-bind', root, '/sys'];
  const inRoot = new Set(prepared && !placedBelow ? topologyViews() : []);
  const views = all.filter((view) => !inRoot.has(view.target));
  if (placedBelow) {
    const folders = new Set<string>();
    for (const { target } of views) {
      for (let folder = posix.dirname(target); folder !== '/sys'; folder = posix.dirname(folder))
        folders.add(folder);
    }
    for (const folder of [...folders].sort((a, b) => depth(a) - depth(b)))
      args.push('--perms', '0755', '--dir', folder);
  }
  for (const { source, target } of views) args.push('--ro-bind', source, target);
  return { args, remount: placedBelow ? ['/sys'] : [] };
}

/**
 * The bubblewrap argv (without the command) for a container: its root view read-only, private
 * /proc, /dev, /tmp, /run and /dev/shm, of /sys only its views, the placements, its working
 * directory, hostname, user, capabilities and seccomp filter. The environment comes from
 * bubblewrap's own.
 */
export async function bwrapArgs(
  bwrap: string,
  container: ContainerSpec,
  placements: readonly OpenPlacement[],
  options: SandboxOptions,
): Promise<string[]> {
  const view = options.view;
  const ordered = [...placements].sort((a, b) => depth(a.target) - depth(b.target));
  const mirrored = new Set<string>();
  for (const p of ordered) {
    await view.makeFolder?.(posix.dirname(p.target));
    const folder = await folderToMirror(view, p.target);
    if (folder) mirrored.add(folder);
  }
  const args = [bwrap];
  if (options.user.kind === 'userns') {
    // bubblewrap never closes the namespace's descriptor, which the command would inherit; its
    // --block-fd descriptor it reads (a namespace file answers at once, EINVAL) and closes.
    const fd = String(options.user.fd);
    args.push('--userns', fd, '--block-fd', fd);
  } else args.push('--unshare-user');
  args.push('--uid', String(container.uid), '--gid', String(container.gid));
  // --die-with-parent: the container ends with its command, as with pid 1 in Kubernetes, not when
  // the last daemon it left ends (bubblewrap's init would wait for those, holding the output open).
  args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent');
  args.push('--hostname', options.hostname);
  args.push(...view.args);
  for (const folder of [...mirrored].sort((a, b) => depth(a) - depth(b))) {
    args.push(...(await mirrorArgs(view, folder)));
  }
  // bubblewrap's /proc has /proc/sys, sysrq-trigger, irq and bus read-only, as OCI runtimes do.
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp', '--tmpfs', '/run');
  args.push('--perms', '1777', '--size', String(options.shmBytes), '--tmpfs', '/dev/shm');
  const sys = sysArgs(
    options.sysRoot,
    options.sys,
    ordered.some((p) => p.target.startsWith('/sys/')),
    options.sysRootPrepared,
  );
  args.push(...sys.args);
  for (const p of ordered) {
    // Folders bubblewrap would create on the way are private (0700); an image's folders are 0755.
    for (const folder of await missingFolders(view, p.target)) args.push('--perms', '0755', '--dir', folder);
    // bubblewrap resolves the descriptor to the path its file has now, binds that, then dies
    // ("Race condition binding dirfd") unless the mount is the descriptor's file (device and
    // inode): a path changed in between fails closed.
    args.push(p.readOnly ? '--ro-bind-fd' : '--bind-fd', String(p.fd), p.target);
  }
  // The root and the tmpfs copies stay read-only like the rest of the view, once their mount points exist.
  for (const folder of ['/', ...sys.remount, ...mirrored]) args.push('--remount-ro', folder);
  args.push('--chdir', container.workingDir ?? '/');
  args.push('--cap-drop', 'ALL');
  for (const cap of containerCapabilities(container.uid)) args.push('--cap-add', cap);
  args.push('--seccomp', String(options.seccompFd));
  args.push('--');
  return args;
}

/** Where a file of the container is written on the host, below the pod's folder. */
export const fileSource = (filesDir: string, index: number, path: string) =>
  join(filesDir, `${index}-${path.replaceAll('/', '_')}`);
