import { chmodSync, chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { folderView, type RootView } from '../host-view.ts';
import type { PreparedMount } from '../prepared-mounts.ts';
import type { ContainerRoot, ContainerSpec } from '../runtime.ts';
import { bwrapArgs, DEFAULT_SHM_BYTES, fileSource, type Placement } from '../sandbox.ts';
import { sysViews } from '../sys-views.ts';
import type { PodContext, PodRecord } from './context.ts';
import { HOST_PATH, safeForRoot } from './environment.ts';

/** The host ids a container user runs as in a pod (`Pod.hostIds`). */
export type HostIdsOf = (uid: number, gid: number) => { hostUid: number; hostGid: number };

/** What the supervisor is told to run for a container (see supervisor.ts). */
export interface SupervisorCommand {
  argv: string[];
  /** The supervisor's environment. */
  env: Record<string, string>;
  /** Files the supervisor gets open (read-only) as descriptors 3, 4, …: bubblewrap reads them. */
  readFds: string[];
  /** Paths it gets open (O_PATH) as the descriptors after those: bubblewrap binds them. */
  pathFds: string[];
  /** What the supervisor joins and becomes before it runs `argv` (see supervisor.ts). */
  netns: string | null;
  /** Made read-only where bubblewrap starts (with `netns` only; see prepared-mounts.ts). */
  prepared: readonly PreparedMount[];
  hostIds: { uid: number; gid: number } | null;
}

/** Unsandboxed as root: setpriv to the container's ids (none for uid 0, or when not root). */
export function dropPrivileges(context: PodContext, spec: ContainerSpec): string[] {
  if (!context.sandbox.root || spec.uid === 0) return [];
  return ['/usr/bin/setpriv', `--reuid=${spec.uid}`, `--regid=${spec.gid}`, '--clear-groups'];
}

/**
 * What a container sees as `/`: an image's folder as the owner whose id range starts at `idBase`
 * sees it (see image-roots.ts; null: as it is on disk).
 */
export async function rootView(
  context: PodContext,
  root: ContainerRoot,
  idBase: number | null,
): Promise<RootView> {
  const sandbox = context.sandbox;
  if (root.kind === 'folder') {
    const roots = sandbox.kind === 'bwrap' ? sandbox.imageRoots : null;
    return folderView(roots && idBase !== null ? await roots.rootFor(root.path, idBase) : root.path);
  }
  if (sandbox.kind !== 'bwrap') throw new Error('the unsandboxed runtime has no root view');
  return sandbox.hostView;
}

/**
 * Writes the container's files into `filesDir` (owned by the container's host ids); returns
 * everything to place in the sandbox: its mounts, its files, and the pod's resolv.conf (in `dir`)
 * unless it brings its own.
 */
export async function writeContainerFiles(
  context: PodContext,
  spec: ContainerSpec,
  filesDir: string,
  dir: string,
  hostIds: HostIdsOf,
): Promise<Placement[]> {
  if (context.sandbox.kind === 'none') {
    const misplaced = [
      ...spec.files.map((f) => f.path),
      ...spec.mounts.filter((m) => m.source !== m.target).map((m) => m.target),
    ];
    if (misplaced.length > 0) {
      throw new Error(
        `the unsandboxed runtime cannot place ${misplaced.join(', ')} in container ${spec.name}: it has no mount namespace`,
      );
    }
    return [];
  }
  const placements: Placement[] = spec.mounts.map((m) => ({ ...m }));
  for (const [index, file] of spec.files.entries()) {
    const source = fileSource(filesDir, index, file.path);
    // Synchronous, as the pod's other small files are (see pod/pod.ts).
    writeFileSync(source, file.content, { mode: 0o600 });
    const owner = hostIds(file.uid ?? spec.uid, file.gid ?? spec.gid);
    chownSync(source, owner.hostUid, owner.hostGid);
    chmodSync(source, file.mode);
    placements.push({ source, target: file.path, readOnly: true });
  }
  if (!spec.files.some((f) => f.path === '/etc/resolv.conf')) {
    placements.push({ source: join(dir, 'resolv.conf'), target: '/etc/resolv.conf', readOnly: true });
  }
  return placements;
}

/**
 * What the supervisor runs: the sandbox, then the container's command, in the pod's network and as
 * the container's host ids. The container's environment goes through the supervisor's environment
 * (root's /proc/PID/environ is 0400), or through a file in the container's `secrets` folder, never
 * through arguments.
 */
export async function containerCommand(
  context: PodContext,
  pod: PodRecord,
  spec: ContainerSpec,
  placements: readonly Placement[],
  dir: string,
  secrets: string,
): Promise<SupervisorCommand> {
  const sandbox = context.sandbox;
  if (sandbox.kind === 'none') {
    const env = ['env', '-i', ...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`)];
    return {
      argv: [...env, ...dropPrivileges(context, spec), ...spec.argv],
      env: { PATH: HOST_PATH },
      readFds: [],
      pathFds: [],
      netns: null,
      prepared: [],
      hostIds: null,
    };
  }
  try {
    writeFileSync(join(dir, 'resolv.conf'), context.resolvConf, { flag: 'wx', mode: 0o644 });
  } catch {
    // Written for an earlier container of the pod.
  }
  const readFds: string[] = [];
  const pass = (file: string) => readFds.push(file) + 2;
  let user: { kind: 'userns'; fd: number } | { kind: 'unshare' } = { kind: 'unshare' };
  let hostIds: SupervisorCommand['hostIds'] = null;
  if (pod.idBase !== null && sandbox.ids) {
    user = { kind: 'userns', fd: pass(await sandbox.ids.namespaceFile(pod.idBase, spec.uid, spec.gid)) };
    hostIds = { uid: spec.hostUid, gid: spec.hostGid };
  }
  const seccompFd = pass(sandbox.seccomp);
  const env: Record<string, string> = {};
  const setenv: string[] = ['--unsetenv', 'PATH', '--unsetenv', 'PWD'];
  for (const [name, value] of Object.entries(spec.env)) {
    if (safeForRoot(name)) env[name] = value;
    else setenv.push('--setenv', name, value);
  }
  env.PATH = HOST_PATH;
  // The variables kept out of the supervisor's environment (names a shell would drop, or that
  // change root's programs) reach bubblewrap as arguments read from a file on the secrets tmpfs (--args), never
  // on a command line, which every host user can read.
  const setenvFile = join(secrets, 'environment');
  writeFileSync(setenvFile, setenv.map((arg) => `${arg}\0`).join(''), { mode: 0o600 });
  const setenvFd = pass(setenvFile);
  // Opened by the launcher after the files, without following a symlink: a symlink is refused, and
  // a folder a job swaps for one afterwards is not what bubblewrap binds (see bwrapArgs).
  const pathFds = placements.map((p) => p.source);
  const open = placements.map((p, i) => ({ ...p, fd: 3 + readFds.length + i }));
  // In a pod's network the supervisor's child starts bubblewrap in the launcher's mount namespace,
  // or one of its own, with the runtime's prepared mounts in it; in the host's there are none. A
  // writable placement inside one would be bound read-only from it: that container starts where
  // none are (as it did before them).
  const netns = context.network.namespaceFile(pod.network);
  const inPrepared = (path: string) =>
    sandbox.prepared.some(({ target }) => path === target || path.startsWith(`${target}/`));
  const prepared =
    netns !== null && !placements.some((p) => !p.readOnly && inPrepared(p.source)) ? sandbox.prepared : [];
  const bwrap = await bwrapArgs(sandbox.bwrap, spec, open, {
    hostname: pod.spec.hostname,
    shmBytes: pod.spec.shmBytes ?? DEFAULT_SHM_BYTES,
    view: await rootView(context, spec.root, pod.idBase),
    user,
    seccompFd,
    sys: sysViews(context.cgroups, pod.cgroups),
    sysRoot: sandbox.sysRoot,
    sysRootPrepared: prepared.length > 0,
  });
  // bwrap's own arguments end with `--`; the variables go before it.
  const argv = [...bwrap.slice(0, -1), '--args', String(setenvFd), '--', ...spec.argv];
  return { argv, env, readFds, pathFds, netns, prepared, hostIds };
}
