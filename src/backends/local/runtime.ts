import type { Duplex } from 'node:stream';
import type { ShellOptions, ShellStream } from '../../jobs/backend.ts';
import type { HostNames } from './host-names.ts';

/**
 * What the local job controller asks of the machine: sandboxed pods. A pod is a network identity
 * (its own address), a cgroup with the pod's limits and a scratch folder; its containers are
 * process trees started in it (init containers one after the other, then the main ones).
 * Implementations: bubblewrap + cgroups + a bridge network when running as root; the host network
 * with a loopback address per pod otherwise; unsandboxed processes only where the configuration
 * explicitly allows it.
 */

export interface ResourceLimits {
  /** CPU limit in millicores; null: no limit. */
  cpuMillis: number | null;
  memoryBytes: number | null;
  /** Most processes at once; null: the runtime's default. */
  pids: number | null;
}

export interface PodSpec {
  /** `<job>-<task>-<index>`: unique on the machine while it lives. */
  name: string;
  /** The job it belongs to; every pod of a job can be found and cleaned by it. */
  jobId: string;
  /**
   * Who the job belongs to (the Kubernetes namespace of its Volcano Job): each owner's containers
   * run on their own range of host user ids.
   */
  owner: string;
  /** The pod's hostname (its name, unless the task template fixed one). */
  hostname: string;
  limits: ResourceLimits;
  /** Size of the private /dev/shm; null: 64 MiB, as Kubernetes' default. */
  shmBytes: number | null;
}

export interface Mount {
  /** A host path. */
  source: string;
  /** Where it appears in the container. */
  target: string;
  readOnly: boolean;
}

/** A file written into the container's view, e.g. /etc/volcano/job.host or /root/.ssh/id_rsa. */
export interface FileContent {
  path: string;
  content: string;
  mode: number;
  uid?: number;
  gid?: number;
}

/**
 * What a container's `/` is, read-only: an image's root folder, or the host userland view (the
 * host's /usr, /bin, /sbin, /lib* and a filtered /etc, nothing else of the host) that images missing
 * from the store fall back to where the configuration allows it.
 */
export type ContainerRoot = { kind: 'folder'; path: string } | { kind: 'host-view' };

export interface ContainerSpec {
  name: string;
  root: ContainerRoot;
  /** Already expanded: no `$(VAR)` left. */
  argv: string[];
  env: Record<string, string>;
  /** null: `/`, or the image's default. */
  workingDir: string | null;
  uid: number;
  gid: number;
  /**
   * The host ids the container's user writes files as (`Pod.hostIds` of uid and gid): the owner of
   * what ucompute creates for the container to write in (its job folder, emptyDir volumes).
   */
  hostUid: number;
  hostGid: number;
  mounts: Mount[];
  files: FileContent[];
  /**
   * Host files that receive the container's output, rotated (`<file>.1` the newest rotated part)
   * at the runtime's size; in a folder no container sees.
   */
  stdout: string;
  stderr: string;
}

export interface ContainerExit {
  /** 128 + the signal's number when a signal ended it (137 for SIGKILL), as Kubernetes reports. */
  exitCode: number;
  /**
   * The signal that ended it, e.g. SIGKILL; null when it exited by itself. Derived from an exit code
   * above 128, which is all the sandbox passes on: a command's own `exit 137` reads as SIGKILL too.
   */
  signal: string | null;
  oomKilled: boolean;
  /** Its supervisor ended without recording how it ended (killed from outside, or the machine restarted). */
  supervisorLost?: true;
  /**
   * The sandbox failed before or instead of running the command (a bind it could not make, a
   * command it could not execute): why, from its own words. `exitCode` is then not the application's.
   */
  sandboxFailure?: string;
  /** The prober killed it: a liveness or startup probe failed past its threshold (said so). */
  probeFailure?: string;
}

export interface RunningContainer {
  readonly name: string;
  /** Resolves once, when the container's main process ended (also for recovered pods). */
  readonly exited: Promise<ContainerExit>;
}

export interface Pod {
  readonly name: string;
  readonly jobId: string;
  /** The address other pods (and the session proxy) reach it at. */
  readonly ip: string;
  /**
   * The host file its containers see as /etc/hosts, among the pod's records (on the host's tmpfs
   * as root, see pods-state-dir.ts): its job writes it in place, the runtime removes it with the pod.
   */
  readonly hostsFile: string;
  /**
   * A host folder for one of the pod's emptyDir volumes, created on first use, owned by the given
   * host ids (the container's `hostUid`/`hostGid`), removed with the pod.
   */
  volumeDir(volume: string, owner: { hostUid: number; hostGid: number }): Promise<string>;
  /** The host ids a container user of this pod runs as (its owner's id range, when ids are remapped). */
  hostIds(uid: number, gid: number): { hostUid: number; hostGid: number };
  /** Starts a container in the pod; resolves once its process runs. */
  start(container: ContainerSpec): Promise<RunningContainer>;
  /** Containers started in this pod (for a recovered pod: those found still known). */
  containers(): RunningContainer[];
  /** The addresses this pod may exchange traffic with besides its own; replaces the previous set. */
  allowPeers(ips: readonly string[]): Promise<void>;
  /** An interactive shell (a pty) inside the pod's last started container, as its user. */
  shell(options: ShellOptions): Promise<ShellStream>;
  /**
   * Runs a command to its end in the named running container, confined and as its user with its
   * variables, as `runc exec` does (the kubelet's exec probes): its exit code and the start of its
   * output. When `signal` aborts, the command is killed and the promise rejects.
   */
  exec(container: string, command: readonly string[], signal: AbortSignal): Promise<ExecResult>;
  /** A TCP stream to a port the pod listens on. */
  connect(port: number): Promise<Duplex>;
  /** What its processes use: CPU time so far and memory now, from its cgroups (null without them). */
  usage(): Promise<PodUsage>;
  /** SIGTERM to every process, SIGKILL after `graceMs`, then removes its cgroups, network, folders. Idempotent. */
  destroy(graceMs: number): Promise<void>;
}

export interface ExecResult {
  /** 128 + the signal's number when a signal ended it. */
  exitCode: number;
  /** Its stdout and stderr together, cut to their first kibibyte. */
  output: string;
}

/** What a pod's processes use, from its cgroups: null where no hierarchy here counts it. */
export interface PodUsage {
  /** CPU seconds used since the pod's cgroups were made. */
  cpuSeconds: number | null;
  /** Bytes of memory in use, without reclaimable page cache. */
  memoryBytes: number | null;
}

export interface Runtime {
  /** One line for the start-up log: sandbox, cgroup version and controllers, network mode. */
  readonly description: string;
  /** What this runtime cannot enforce here, said at start (no root: shared host network, …). */
  readonly warnings: readonly string[];
  /** The bridge, subnet, cgroup folder and host ids it holds on the host (as root; see host-names.ts). */
  readonly hostNames: HostNames | null;
  /** What the machine offers to pods. */
  readonly capacity: { cpuMillis: number; memoryBytes: number };
  createPod(spec: PodSpec): Promise<Pod>;
  /**
   * Pods an earlier ucompute process left (from the state folder), to call once before createPod:
   * every pod that started a container, running or not, with its containers' `exited` resolving from
   * the statuses recorded meanwhile (or when they end). Dead leftovers (pods half created, half
   * destroyed, or that never started a container, and stray namespaces) are cleaned.
   */
  recover(): Promise<Pod[]>;
  /** Releases the runtime's own resources; pods keep running (a restart finds them again). */
  close(): Promise<void>;
}
