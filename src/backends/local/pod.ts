import { access, chmod, chown, mkdir, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import * as nodePty from 'node-pty';
import type { ShellOptions, ShellStream } from '../../jobs/backend.ts';
import { type CgroupLayout, cgroupPids, oomKillCount, removePodCgroups } from './cgroups.ts';
import { folderView, type RootView } from './host-view.ts';
import type { ImageRoots } from './image-roots.ts';
import type { Launcher } from './launcher.ts';
import type { Network, PodNetwork } from './network.ts';
import type {
  ContainerExit,
  ContainerRoot,
  ContainerSpec,
  Pod,
  PodSpec,
  RunningContainer,
} from './runtime.ts';
import {
  bwrapArgs,
  containerCapabilities,
  DEFAULT_SHM_BYTES,
  fileSource,
  type Placement,
} from './sandbox.ts';
import { readSandboxFailure } from './sandbox-status.ts';
import { enterContainerArgv } from './shell-entry.ts';
import { CGROUP_JOIN_FAILED, SUPERVISOR_NAME, supervisorCommand } from './supervisor.ts';
import { checkContainerIds, type IdRanges } from './userns.ts';

/** How long a connection to a pod's port may take to be answered (its network is local). */
const CONNECT_TIMEOUT_MS = 5_000;

/** How containers are isolated; chosen once by the runtime factory. */
export type Sandbox =
  | {
      kind: 'bwrap';
      bwrap: string;
      root: boolean;
      /** The host userland view, built once. */
      hostView: RootView;
      /** The compiled seccomp program. */
      seccomp: string;
      /** Owners' id ranges when running as root (container ids are remapped); null otherwise. */
      ids: IdRanges | null;
      /** Images as each owner sees them (idmapped), where ids are remapped and the file system can. */
      imageRoots: ImageRoots | null;
    }
  | { kind: 'none'; root: boolean };

/** What every pod of a runtime shares. */
export interface PodContext {
  podsDir: string;
  /**
   * Where containers' files (Secrets, ConfigMaps, keys) are written: a tmpfs as root, so that they
   * never reach the disk.
   */
  secretsDir: string;
  sandbox: Sandbox;
  /** null: no cgroups (not root); processes are found by process group instead. */
  cgroups: CgroupLayout | null;
  network: Network;
  /** /etc/resolv.conf for pods: the host's, without loopback name servers a pod cannot reach. */
  resolvConf: string;
  /**
   * Starts supervisors (detached: they outlive ucompute) and tells when they end; it keeps the
   * event loop alive while they run, so that a caller may await their end, until the runtime closes.
   */
  launcher: Launcher;
  logs: LogRotation;
}

/** What the state folder keeps about a pod, so that a restarted ucompute finds it again. */
export interface PodRecord {
  spec: PodSpec;
  /** The first host id of the owner's range; null when container ids are not remapped. */
  idBase: number | null;
  network: PodNetwork;
  cgroups: string[];
  peers: string[];
}

interface ContainerRecord {
  spec: ContainerSpec;
  /** The pod's OOM-kill count when the container started. */
  oomBase: number;
}

const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** How each container's stdout and stderr files are rotated (the kubelet's containerLogMax*). */
export interface LogRotation {
  /** A file is rotated once it holds this many bytes. */
  maxSizeBytes: number;
  /** Files kept per stream, the current one included (at least 2). */
  maxFiles: number;
}

/** The kubelet's defaults for containerLogMaxSize and containerLogMaxFiles. */
export const DEFAULT_LOGS: LogRotation = { maxSizeBytes: 10 * 2 ** 20, maxFiles: 5 };

/** For shells: joins the pod's cgroups, as the supervisor does, then becomes the command. */
const JOIN_AND_EXEC = `cgroups=$1; shift
IFS=:
for f in $cgroups; do echo $$ > "$f" || exit ${CGROUP_JOIN_FAILED}; done
unset IFS
exec "$@"
`;

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}$/;

export function checkName(kind: string, name: string): void {
  if (!NAME.test(name)) throw new Error(`${kind} name ${JSON.stringify(name)} is not a valid name`);
}

const procsFiles = (dirs: readonly string[]) => dirs.map((d) => join(d, 'cgroup.procs'));
/** Bubblewrap's status file in a container's state folder (see sandbox-status.ts). */
const SANDBOX_STATUS = 'sandbox-status';

/** 128+n is how a shell (and bubblewrap) reports a child ended by signal n, as Kubernetes does. */
function exitFromStatus(status: number, oomKilled: boolean): ContainerExit {
  const name = Object.entries(constants.signals).find(([, n]) => n === status - 128)?.[0] ?? null;
  return { exitCode: status, signal: status > 128 ? name : null, oomKilled };
}

async function readNumber(path: string): Promise<number | null> {
  try {
    const text = (await readFile(path, 'utf8')).trim();
    return text === '' ? null : Number(text);
  } catch {
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether `pid` is still the supervisor that was recorded (pids are reused). */
async function isSupervisor(pid: number): Promise<boolean> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).includes(SUPERVISOR_NAME);
  } catch {
    return false;
  }
}

/** SIGKILL to the listed processes until none is left; after `patientRounds` rounds of waiting. */
async function killUntilGone(list: () => Promise<number[]>, patientRounds = 0) {
  for (let round = 0; round < patientRounds + 100; round++) {
    const pids = await list();
    if (pids.length === 0) return;
    if (round >= patientRounds) signalAll(pids, 'SIGKILL');
    await sleep(10);
  }
  throw new Error(`processes ${(await list()).join(', ')} survived SIGKILL`);
}

const pidNamespace = (pid: number) => readlink(`/proc/${pid}/ns/pid`).catch(() => null);

function signalAll(pids: readonly number[], signal: NodeJS.Signals) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

export const podDir = (context: PodContext, name: string) => join(context.podsDir, name);
/** A container's files, on the secrets tmpfs. */
const secretsOf = (context: PodContext, pod: string, container: string) =>
  join(context.secretsDir, pod, container);

/**
 * Pods' folders can be passed, not listed, by other users: bubblewrap 0.8 binds by path as the
 * container's host user, and unsandboxed containers of other users reach their volumes; what lies
 * in them is the container's own or public.
 */
export const podDirMode = 0o711;

/** A pod's object, for a new pod and for one found again after a restart. */
export function podHandle(context: PodContext, record: PodRecord, found: Map<string, ContainerHandle>): Pod {
  const dir = podDir(context, record.spec.name);
  const containersDir = join(dir, 'containers');
  const containers = found;
  let destroying: Promise<void> | null = null;
  /** Starts under way: destroy waits for them, so that no supervisor appears after it looked. */
  const starting = new Set<Promise<unknown>>();

  const saveRecord = () => writeFile(join(dir, 'pod.json'), JSON.stringify(record));

  const supervisorPids = () =>
    new Set([...containers.values()].map((c) => c.pid).filter((p): p is number => p !== null));

  /**
   * Ends the pod's processes: SIGTERM to what runs inside the containers, SIGKILL after the grace
   * period, supervisors last so that they record how their container ended.
   */
  async function stop(graceMs: number) {
    const deadline = Date.now() + graceMs;
    if (record.cgroups.length === 0) return stopGroups(deadline);
    const supervisors = supervisorPids();
    const all = () => cgroupPids(record.cgroups);
    const nonSupervisors = async () => (await all()).filter((p) => !supervisors.has(p));
    // bubblewrap's own processes die of SIGTERM and would report it for a command that ignores it.
    const ours = await pidNamespace(process.pid);
    const inContainers = async () => {
      const pids = await nonSupervisors();
      if (context.sandbox.kind === 'none') return pids;
      const namespaces = await Promise.all(pids.map(pidNamespace));
      return pids.filter((_, i) => namespaces[i] !== null && namespaces[i] !== ours);
    };
    let targets = await inContainers();
    signalAll(targets, 'SIGTERM');
    while (targets.length > 0 && Date.now() < deadline) {
      await sleep(Math.min(20, Math.max(1, deadline - Date.now())));
      targets = await inContainers();
    }
    // A forking process could escape one round of SIGKILL; the cgroup drains within a few rounds.
    await killUntilGone(nonSupervisors);
    await killUntilGone(all, 50);
    // A supervisor started just before the destroy may not have joined the cgroups yet.
    await killUntilGone(liveSupervisors);
  }

  async function liveSupervisors(): Promise<number[]> {
    const pids = [...supervisorPids()];
    const alive = await Promise.all(pids.map(isSupervisor));
    return pids.filter((_, i) => alive[i]);
  }

  /** Removes the cgroups; a process that joined after the last look (EBUSY) is killed first. */
  async function removeCgroups() {
    for (let attempt = 0; ; attempt++) {
      try {
        return await removePodCgroups(record.cgroups);
      } catch (error) {
        if (attempt >= 50) throw error;
        await killUntilGone(() => cgroupPids(record.cgroups));
        await sleep(10);
      }
    }
  }

  /** Without cgroups: the process groups of the supervisors. */
  async function stopGroups(deadline: number) {
    const groups = async () => [...supervisorPids()].filter(isAlive).map((pid) => -pid);
    signalAll(await groups(), 'SIGTERM');
    while ((await groups()).length > 0 && Date.now() < deadline) await sleep(20);
    await killUntilGone(groups);
  }

  function start(spec: ContainerSpec): Promise<RunningContainer> {
    if (destroying) return Promise.reject(new Error(`pod ${record.spec.name} is being destroyed`));
    const started = startContainer(spec);
    starting.add(started);
    const done = () => starting.delete(started);
    started.then(done, done);
    return started;
  }

  async function startContainer(spec: ContainerSpec): Promise<RunningContainer> {
    checkName('container', spec.name);
    const previous = containers.get(spec.name);
    if (previous && !previous.ended) {
      throw new Error(`container ${spec.name} of pod ${record.spec.name} is still running`);
    }
    if (record.idBase !== null) checkContainerIds(spec.uid, spec.gid);
    const ids = hostIds(spec.uid, spec.gid);
    if (spec.hostUid !== ids.hostUid || spec.hostGid !== ids.hostGid) {
      throw new Error(
        `container ${spec.name}: hostUid/hostGid ${spec.hostUid}/${spec.hostGid} are not the host ids of uid/gid ${spec.uid}/${spec.gid} in pod ${record.spec.name} (${ids.hostUid}/${ids.hostGid})`,
      );
    }
    const stateDir = join(containersDir, spec.name);
    const secrets = secretsOf(context, record.spec.name, spec.name);
    await Promise.all([stateDir, secrets].map((d) => rm(d, { recursive: true, force: true })));
    await mkdir(stateDir, { recursive: true, mode: 0o711 });
    await mkdir(secrets, { recursive: true, mode: 0o711 });
    const placements = await writeFiles(spec, secrets);
    const containerRecord: ContainerRecord = {
      // Without its environment (Secrets among it), which stays off the disk: a shell in a
      // recovered container takes it from the container's process.
      spec: { ...spec, env: {} },
      oomBase: context.cgroups ? await oomKillCount(context.cgroups, record.cgroups) : 0,
    };
    await writeFile(join(stateDir, 'container.json'), JSON.stringify(containerRecord), { mode: 0o600 });
    const {
      argv: command,
      env,
      readFds,
      pathFds,
      netns,
      hostIds: supervisorIds,
    } = await containerCommand(context, record, spec, placements, dir, secrets);
    await Promise.all(
      [spec.stdout, spec.stderr].map((file) => mkdir(dirname(file), { recursive: true, mode: 0o700 })),
    );
    if (destroying) throw new Error(`pod ${record.spec.name} is being destroyed`);
    let handle: ContainerHandle | null = null;
    const { file, args } = supervisorCommand({
      stateDir,
      cgroupProcs: procsFiles(record.cgroups),
      stdout: spec.stdout,
      stderr: spec.stderr,
      logs: context.logs,
      netns,
      hostIds: supervisorIds,
      sandboxStatus: context.sandbox.kind === 'bwrap' ? join(stateDir, SANDBOX_STATUS) : null,
      argv: command,
    });
    const pid = await context.launcher
      .spawnDetached(
        {
          file,
          args,
          // Descriptors 3 onwards: what bubblewrap reads, numbered as its arguments say.
          readFds,
          pathFds,
          cwd: context.sandbox.kind === 'none' ? (spec.workingDir ?? '/') : '/',
          env,
        },
        () => void handle?.check(),
      )
      .catch((error: Error) => {
        throw new Error(`could not start container ${spec.name}: ${error.message}`);
      });
    handle = containerHandle(context, record, spec.name, stateDir, containerRecord, pid);
    containers.set(spec.name, handle);
    // It may have ended before its handle existed.
    void handle.check();
    return handle.running;
  }

  function hostIds(uid: number, gid: number) {
    if (record.idBase !== null) return { hostUid: record.idBase + uid, hostGid: record.idBase + gid };
    // Unsandboxed as root: the container's own ids (see dropPrivileges); otherwise ucompute's own.
    if (context.sandbox.kind === 'none' && context.sandbox.root) return { hostUid: uid, hostGid: gid };
    return { hostUid: process.getuid!(), hostGid: process.getgid!() };
  }

  /** Writes the container's files below its state folder; returns everything to place in the sandbox. */
  async function writeFiles(spec: ContainerSpec, filesDir: string): Promise<Placement[]> {
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
      await writeFile(source, file.content, { mode: 0o600 });
      const owner = hostIds(file.uid ?? spec.uid, file.gid ?? spec.gid);
      await chown(source, owner.hostUid, owner.hostGid);
      await chmod(source, file.mode);
      placements.push({ source, target: file.path, readOnly: true });
    }
    if (!spec.files.some((f) => f.path === '/etc/resolv.conf')) {
      placements.push({ source: join(dir, 'resolv.conf'), target: '/etc/resolv.conf', readOnly: true });
    }
    return placements;
  }

  async function shell(options: ShellOptions) {
    const last = [...containers.values()].at(-1);
    if (!last) throw new Error(`pod ${record.spec.name} has no container to open a shell in`);
    const spec = last.spec;
    let argv: string[];
    let containerEnv = spec.env;
    if (context.sandbox.kind === 'none') {
      argv = [...dropPrivileges(context, spec), '/bin/sh'];
    } else {
      const target = await containerProcess(last);
      // The container's own (a recovered container's record does not keep it).
      containerEnv = await processEnvironment(target);
      // Confined as the container's command is: its namespaces, user, capabilities and seccomp.
      argv = enterContainerArgv(target, spec, context.sandbox.seccomp, containerCapabilities(spec.uid), [
        await shellIn(context, spec.root),
      ]);
    }
    // The shell starts through root's programs on the host: none of the variables that change them.
    const env: Record<string, string> = { TERM: 'xterm-256color' };
    for (const [name, value] of Object.entries(containerEnv)) {
      if (SHELL_NAME.test(name) && (!ROOT_SENSITIVE.test(name) || name === 'PATH')) env[name] = value;
    }
    const pty = nodePty.spawn(
      '/bin/sh',
      ['-c', JOIN_AND_EXEC, 'ucompute-shell', procsFiles(record.cgroups).join(':'), ...argv],
      {
        name: env.TERM,
        cols: options.cols,
        rows: options.rows,
        cwd: context.sandbox.kind === 'none' ? (spec.workingDir ?? '/') : '/',
        env: { ...env, PATH: env.PATH ?? HOST_PATH },
        encoding: null,
      },
    );
    return ptyStream(pty);
  }

  return {
    name: record.spec.name,
    jobId: record.spec.jobId,
    ip: record.network.ip,
    async volumeDir(volume, owner) {
      checkName('volume', volume);
      const path = join(dir, 'volumes', volume);
      await mkdir(join(dir, 'volumes'), { recursive: true, mode: 0o711 });
      const created = await mkdir(path).then(
        () => true,
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'EEXIST') return false;
          throw error;
        },
      );
      if (created) {
        // Like Kubernetes' emptyDir: writable by whichever user the containers run as; owned by the
        // first one's host ids, so that files created there belong to the owner's range.
        await chown(path, owner.hostUid, owner.hostGid);
        await chmod(path, 0o777);
      }
      return path;
    },
    hostIds,
    start,
    containers: () => [...containers.values()].map((c) => c.running),
    async allowPeers(ips) {
      await context.network.allowPeers(record.network, record.peers, ips);
      record.peers = [...ips];
      await saveRecord();
    },
    shell,
    connect: (port) =>
      new Promise((resolve, reject) => {
        const socket = netConnect({ host: record.network.ip, port });
        // An unanswered SYN would otherwise hold the caller (a proxied request) for minutes.
        socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(new Error('no answer in time')));
        socket.once('connect', () => {
          socket.setTimeout(0);
          resolve(socket);
        });
        socket.once('error', (error) =>
          reject(new Error(`could not connect to pod ${record.spec.name} port ${port}: ${error.message}`)),
        );
      }),
    destroy(graceMs) {
      destroying ??= (async () => {
        await writeFile(join(dir, 'destroying'), '').catch(() => undefined);
        await Promise.allSettled(starting);
        await stop(graceMs);
        await Promise.all([...containers.values()].map((c) => c.check()));
        await removeCgroups();
        await context.network.release(record.network, record.peers);
        await rm(dir, { recursive: true, force: true });
        await rm(join(context.secretsDir, record.spec.name), { recursive: true, force: true });
      })();
      return destroying;
    },
  };
}

/** What a pod knows of one of its containers. */
export interface ContainerHandle {
  readonly spec: ContainerSpec;
  readonly running: RunningContainer;
  /** The supervisor's pid; null when it is unknown (it never wrote it). */
  readonly pid: number | null;
  readonly ended: boolean;
  /** Resolves `exited` if the container ended (by its exit file, or its supervisor's absence). */
  check(): Promise<void>;
}

function containerHandle(
  context: PodContext,
  pod: PodRecord,
  name: string,
  stateDir: string,
  record: ContainerRecord,
  pid: number | null,
): ContainerHandle {
  let resolveExit!: (exit: ContainerExit) => void;
  const exited = new Promise<ContainerExit>((resolve) => {
    resolveExit = resolve;
  });
  let ended = false;
  const handle: ContainerHandle = {
    spec: record.spec,
    running: { name, exited },
    pid,
    get ended() {
      return ended;
    },
    async check() {
      if (ended) return;
      const exitFile = join(stateDir, 'exit');
      let status = await readNumber(exitFile);
      if (status === null) {
        if (pid !== null && (await isSupervisor(pid))) return;
        // It may have written its status just before it ended.
        status = await readNumber(exitFile);
      }
      let exit: ContainerExit;
      if (status !== null) {
        const ooms = context.cgroups ? await oomKillCount(context.cgroups, pod.cgroups) : 0;
        exit = exitFromStatus(status, status === 128 + constants.signals.SIGKILL && ooms > record.oomBase);
        if (context.sandbox.kind === 'bwrap') {
          const failure = await readSandboxFailure(
            status,
            join(stateDir, SANDBOX_STATUS),
            record.spec.stderr,
          );
          if (failure) exit = { ...exit, sandboxFailure: failure };
        }
      } else {
        // The supervisor itself was killed (destroy after its grace, from outside, or the machine restarted).
        exit = { ...exitFromStatus(128 + constants.signals.SIGKILL, false), supervisorLost: true };
      }
      if (ended) return;
      ended = true;
      resolveExit(exit);
    },
  };
  return handle;
}

/** The containers a restarted ucompute finds in a pod's state folder; watches those still running. */
export async function findContainers(
  context: PodContext,
  record: PodRecord,
): Promise<Map<string, ContainerHandle>> {
  const containersDir = join(podDir(context, record.spec.name), 'containers');
  const found = new Map<string, ContainerHandle>();
  let names: string[] = [];
  try {
    names = await readdir(containersDir);
  } catch {
    return found;
  }
  for (const name of names) {
    const stateDir = join(containersDir, name);
    let containerRecord: ContainerRecord;
    try {
      containerRecord = JSON.parse(await readFile(join(stateDir, 'container.json'), 'utf8'));
    } catch {
      continue;
    }
    const pid = await readNumber(join(stateDir, 'pid'));
    const handle = containerHandle(context, record, name, stateDir, containerRecord, pid);
    await handle.check();
    found.set(name, handle);
  }
  return found;
}

/** Polls containers of recovered pods (they are not our children, so no exit event comes). */
export function watchContainers(handles: () => Iterable<ContainerHandle>, intervalMs: number): () => void {
  const timer = setInterval(() => {
    for (const handle of handles()) void handle.check();
  }, intervalMs);
  return () => clearInterval(timer);
}

function dropPrivileges(context: PodContext, spec: ContainerSpec): string[] {
  if (!context.sandbox.root || spec.uid === 0) return [];
  return ['/usr/bin/setpriv', `--reuid=${spec.uid}`, `--regid=${spec.gid}`, '--clear-groups'];
}

/**
 * Variables that change how the root processes before bubblewrap (the supervisor, a shell's sh,
 * nsenter and setpriv) behave: the dynamic loader's and libc's, locales, Perl's (PERL5OPT and
 * PERL5LIB load code into the supervisor), the shell's own. A container's value for them reaches
 * it through bubblewrap's arguments, never through those processes' environment.
 */
const ROOT_SENSITIVE =
  /^(LD_.*|PERL.*|GCONV_PATH|GETCONF_DIR|GLIBC_TUNABLES|MALLOC_.*|LOCPATH|NLSPATH|LC_.*|LANG|LANGUAGE|HOSTALIASES|LOCALDOMAIN|RES_OPTIONS|RESOLV_.*|NIS_PATH|TZ|TZDIR|TMPDIR|PATH|PWD|OLDPWD|IFS|ENV|BASH_ENV|PS4|CDPATH|SHELLOPTS|POSIXLY_CORRECT)$/;
/** What the shell passes on to the programs it runs: valid shell names only. */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface SupervisorCommand {
  argv: string[];
  /** The supervisor's environment. */
  env: Record<string, string>;
  /** Files the supervisor gets open (read-only) as descriptors 3, 4, …: bubblewrap reads them. */
  readFds: string[];
  /** Paths it gets open (O_PATH) as the descriptors after those: bubblewrap binds them. */
  pathFds: string[];
  /** What the supervisor joins and becomes before it runs `argv` (see supervisor.ts). */
  netns: string | null;
  hostIds: { uid: number; gid: number } | null;
}

/**
 * What the supervisor runs: the sandbox, then the container's command, in the pod's network and as
 * the container's host ids. The container's environment goes through the supervisor's environment
 * (root's /proc/PID/environ is 0400), or through a file in the container's `secrets` folder, never
 * through arguments.
 */
async function containerCommand(
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
      hostIds: null,
    };
  }
  await writeFile(join(dir, 'resolv.conf'), context.resolvConf, { flag: 'wx', mode: 0o644 }).catch(
    () => undefined,
  );
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
    if (SHELL_NAME.test(name) && !ROOT_SENSITIVE.test(name)) env[name] = value;
    else setenv.push('--setenv', name, value);
  }
  env.PATH = HOST_PATH;
  // The variables kept out of the supervisor's environment (names a shell would drop, or that
  // change root's programs) reach bubblewrap as arguments read from a file on the secrets tmpfs (--args), never
  // on a command line, which every host user can read.
  const setenvFile = join(secrets, 'environment');
  await writeFile(setenvFile, setenv.map((arg) => `${arg}\0`).join(''), { mode: 0o600 });
  const setenvFd = pass(setenvFile);
  // Opened by the launcher after the files, without following a symlink: a symlink is refused, and
  // a folder a job swaps for one afterwards is not what bubblewrap binds (see bwrapArgs).
  const pathFds = placements.map((p) => p.source);
  const open = placements.map((p, i) => ({ ...p, fd: 3 + readFds.length + i }));
  const bwrap = await bwrapArgs(sandbox.bwrap, spec, open, {
    hostname: pod.spec.hostname,
    shmBytes: pod.spec.shmBytes ?? DEFAULT_SHM_BYTES,
    view: await rootView(context, spec.root, pod.idBase),
    user,
    seccompFd,
  });
  // bwrap's own arguments end with `--`; the variables go before it.
  const argv = [...bwrap.slice(0, -1), '--args', String(setenvFd), '--', ...spec.argv];
  return { argv, env, readFds, pathFds, netns: context.network.namespaceFile(pod.network), hostIds };
}

/** What a container sees as `/`: an image's folder as the owner whose range starts at `idBase` sees it. */
async function rootView(context: PodContext, root: ContainerRoot, idBase: number | null): Promise<RootView> {
  const sandbox = context.sandbox;
  if (root.kind === 'folder') {
    const roots = sandbox.kind === 'bwrap' ? sandbox.imageRoots : null;
    return folderView(roots && idBase !== null ? await roots.rootFor(root.path, idBase) : root.path);
  }
  if (sandbox.kind !== 'bwrap') throw new Error('the unsandboxed runtime has no root view');
  return sandbox.hostView;
}

/** The process of a running container a shell joins, once bubblewrap has set the container up. */
async function containerProcess(container: ContainerHandle): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (container.ended || container.pid === null)
      throw new Error(`container ${container.spec.name} has ended`);
    const pid = await commandProcess(container.pid);
    if (pid !== null) return pid;
    await sleep(20);
  }
  throw new Error(`container ${container.spec.name} has no running process`);
}

/** The command under bubblewrap's init below `supervisor`, or null while there is none yet. */
async function commandProcess(supervisor: number): Promise<number | null> {
  const parents = new Map<number, number[]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // Ended meanwhile.
    }
  }
  const hostNamespace = await pidNamespace(supervisor);
  // Breadth first: the first process in a new pid namespace is bubblewrap's init, its child the command.
  const queue = [supervisor];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    if ((await pidNamespace(pid)) !== hostNamespace) return parents.get(pid)?.[0] ?? null;
    queue.push(...(parents.get(pid) ?? []));
  }
  return null;
}

/** A process's environment (root reads any). */
async function processEnvironment(pid: number): Promise<Record<string, string>> {
  const text = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  const pairs = text.split('\0').filter((entry) => entry.includes('='));
  return Object.fromEntries(
    pairs.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}

/** The first of these the image has, as UCloud (and the Kubernetes backend) chooses; else sh. */
const SHELLS = ['/bin/bash', '/usr/bin/bash', '/bin/zsh', '/usr/bin/zsh', '/bin/fish', '/usr/bin/fish'];

async function shellIn(context: PodContext, root: ContainerRoot): Promise<string> {
  const view = await rootView(context, root, null);
  for (const shell of SHELLS) {
    const path = view.hostPath(shell);
    if (path === null) continue;
    try {
      await access(path);
      return shell;
    } catch {}
  }
  return '/bin/sh';
}

function ptyStream(pty: nodePty.IPty): ShellStream {
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      pty.write(chunk);
      callback();
    },
    final(callback) {
      pty.kill();
      callback();
    },
    destroy(error, callback) {
      pty.kill();
      callback(error);
    },
  });
  pty.onData((data) => stream.push(data));
  const exitCode = new Promise<number>((resolve) =>
    pty.onExit(({ exitCode, signal }) => {
      stream.push(null);
      resolve(signal ? 128 + signal : exitCode);
    }),
  );
  return Object.assign(stream, { resize: (o: ShellOptions) => pty.resize(o.cols, o.rows), exitCode });
}
