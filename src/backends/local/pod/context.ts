import { join } from 'node:path';
import type { CgroupLayout } from '../cgroups.ts';
import type { RootView } from '../host-view.ts';
import type { ImageRoots } from '../image-roots.ts';
import type { Launcher } from '../launcher.ts';
import type { Network, PodNetwork } from '../network.ts';
import type { PreparedMount } from '../prepared-mounts.ts';
import type { SyscallNumbers } from '../programs.ts';
import type { PodSpec } from '../runtime.ts';
import type { IdRanges } from '../userns.ts';

/** How containers are isolated; chosen once by the runtime factory. */
export type Sandbox =
  | {
      kind: 'bwrap';
      bwrap: string;
      root: boolean;
      /** The host userland view, built once. */
      hostView: RootView;
      /** What containers' /sys is: the views' mount points (sys-views.ts), made at start. */
      sysRoot: string;
      /** What is made read-only where bubblewrap starts, in a pod's network (prepared-mounts.ts). */
      prepared: readonly PreparedMount[];
      /** The compiled seccomp program. */
      seccomp: string;
      /** System call numbers the supervisor needs (from libseccomp, with the program). */
      syscalls: SyscallNumbers;
      /** Owners' id ranges when running as root (container ids are remapped); null otherwise. */
      ids: IdRanges | null;
      /** Images as each owner sees them (idmapped), where ids are remapped; null otherwise. */
      imageRoots: ImageRoots | null;
    }
  | { kind: 'none'; root: boolean };

/** What every pod of a runtime shares. */
export interface PodContext {
  /** Pods' records and containers' state files (a tmpfs as root, see create-runtime.ts). */
  podsDir: string;
  /** Pods' emptyDir volumes, on disk: `<volumesDir>/<pod>/<volume>`. */
  volumesDir: string;
  /** Told when a pod's folders are gone (the runtime, once closed, then removes what it made). */
  podGone(): Promise<void>;
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

/** How each container's stdout and stderr files are rotated (the kubelet's containerLogMax*). */
export interface LogRotation {
  /** A file is rotated once it holds this many bytes. */
  maxSizeBytes: number;
  /** Files kept per stream, the current one included (at least 2). */
  maxFiles: number;
}

/** The kubelet's defaults for containerLogMaxSize and containerLogMaxFiles. */
export const DEFAULT_LOGS: LogRotation = { maxSizeBytes: 10 * 2 ** 20, maxFiles: 5 };

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}$/;

export function checkName(kind: string, name: string): void {
  if (!NAME.test(name)) throw new Error(`${kind} name ${JSON.stringify(name)} is not a valid name`);
}

export const podDir = (context: PodContext, name: string) => join(context.podsDir, name);

/** A container's files, on the secrets tmpfs. */
export const secretsOf = (context: PodContext, pod: string, container: string) =>
  join(context.secretsDir, pod, container);

/** The pod's cgroups' `cgroup.procs` files: writing a pid there moves the process in. */
export const procsFiles = (dirs: readonly string[]) => dirs.map((d) => join(d, 'cgroup.procs'));

/**
 * Pods' folders can be passed, not listed, by other users: bubblewrap 0.8 binds by path as the
 * container's host user, and unsandboxed containers of other users reach their volumes; what lies
 * in them is the container's own or public.
 */
export const podDirMode = 0o711;
