/**
 * The supervisor: one process per container, forked by the supervisors' launcher, that outlives
 * ucompute. It joins the pod's cgroups before anything of the container runs, runs the command as
 * its child, writes the child's stdout and stderr to their files with rotation, and records the
 * exit status in the state folder once the output is written: the status survives a ucompute
 * restart, and a reader that sees it finds the whole output.
 *
 * It is a Perl program (programs/supervisor.pl, see programs.ts): one Perl process does what took
 * eight processes and two more programs before bubblewrap in sh (the shell, mkfifo, a subshell,
 * `head` and `wc` per stream; nsenter and setpriv). The child joins the namespace and becomes the
 * ids before it runs the command, and checks it did; a failure is told on the container's stderr
 * with status 126. In a pod's network namespace the child also leaves the host's /run/netns mounts
 * behind: bubblewrap copies the whole mount table it starts in and reads it for each of its binds,
 * and that folder holds one mount per pod on the machine. It joins the launcher's mount namespace
 * without them (a slave of the host's, made again when the host's mounts changed), or drops them in
 * a namespace of its own; either holds the runtime's prepared mounts (prepared-mounts.ts). A caught signal (unlike an ignored one) is reset for the child, so SIGTERM
 * reaches the command while the supervisor stays to record how it ended. Each stream is copied as
 * it comes; a file that reaches the size shifts (`f` -> `f.1` -> …, the oldest dropped) and a new
 * one starts, as does a non-empty file left by an earlier run of the container. A stream whose
 * file cannot be written is closed, so its writer gets EPIPE rather than filling the disk
 * elsewhere. The files live in ucompute's own state folder (0700), which no container sees, so
 * nothing a job plants is followed. The output ends when every holder of the pipes closed them
 * (bubblewrap's --die-with-parent ends whatever the command left behind; unsandboxed, a daemon
 * that keeps the output open keeps the container running).
 */

import { encodePrepared, type PreparedMount } from './prepared-mounts.ts';
import type { SyscallNumbers } from './programs.ts';

/** In every supervisor's command line: a recorded pid is a supervisor only while this is there. */
export const SUPERVISOR_NAME = 'ucompute-supervisor';
/** Exit status recorded when the supervisor could not put itself into the pod's cgroups. */
export const CGROUP_JOIN_FAILED = 125;

export interface SupervisedCommand {
  /** The container's state folder: `pid` and `exit` are written there. */
  stateDir: string;
  /** The pod's `cgroup.procs` files. */
  cgroupProcs: readonly string[];
  stdout: string;
  stderr: string;
  /** The pod's network namespace, joined before the command starts; null: the host's network. */
  netns: string | null;
  /** Host ids the command starts as, without supplementary groups; null: the supervisor's. */
  hostIds: { uid: number; gid: number } | null;
  /** The numbers of setns and setgroups on this machine; needed with `netns` or `hostIds`. */
  syscalls: SyscallNumbers | null;
  /**
   * Where bubblewrap (the command) writes its JSON status (see sandbox-status.ts): the child opens
   * it first and hands it over as `--json-status-fd`. Null: the command is not bubblewrap.
   */
  sandboxStatus: string | null;
  /**
   * Mounts made read-only where bubblewrap starts, before it does (see prepared-mounts.ts); only
   * with `netns`, whose mount namespace they go in.
   */
  prepared: readonly PreparedMount[];
  /** A file is rotated once it holds `maxSizeBytes`; `maxFiles` are kept per stream (at least 2). */
  logs: { maxSizeBytes: number; maxFiles: number };
  argv: readonly string[];
}

/**
 * The supervisor's arguments for a container's command, its name first: what supervise() of
 * supervisor.pl takes, whether the supervisors' launcher forks it (supervisor-launcher.ts) or a
 * Perl runs the program with them.
 */
export function supervisorArguments(command: SupervisedCommand): string[] {
  const syscalls = () => {
    if (!command.syscalls)
      throw new Error('the supervisor joins a namespace or ids only with system call numbers');
    return command.syscalls;
  };
  return [
    SUPERVISOR_NAME,
    command.stateDir,
    command.cgroupProcs.join(':'),
    command.stdout,
    command.stderr,
    String(command.logs.maxSizeBytes),
    String(command.logs.maxFiles),
    command.netns ?? '',
    command.hostIds ? `${command.hostIds.uid}:${command.hostIds.gid}` : '',
    command.netns
      ? [syscalls().setns, syscalls().unshare, syscalls().mount, syscalls().umount2].join(':')
      : '',
    command.hostIds ? String(syscalls().setgroups) : '',
    command.sandboxStatus ?? '',
    command.netns ? encodePrepared(command.prepared) : '',
    ...command.argv,
  ];
}
