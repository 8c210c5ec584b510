import { PYTHON, programPath } from './programs.ts';

/**
 * How a shell enters a running sandboxed container, as `runc exec` does: it joins the container's
 * namespaces (user, mount, pid, network, uts, ipc), root and working directory, becomes its user,
 * and takes the same limits as the container's command before running anything of the container:
 * the capabilities the container has (Docker's set for uid 0, bounding, inheritable and ambient as
 * bubblewrap leaves them; nothing otherwise), no_new_privs and the same seccomp program. nsenter alone
 * would leave a root shell every capability of the user namespace (remounting read-only inputs
 * writable) and no seccomp filter; bubblewrap cannot join a mount namespace, and nothing of the
 * host can be run once inside one (an image has no bubblewrap): so the host's Python does it with
 * system calls (programs/enter-container.py), loaded before it enters (`-I`: no variable or file of
 * the job changes what it runs). The shell's process is a child (a pid namespace applies to children).
 * This is the argv that runs `command` so in the container whose process is `target`.
 */
export function enterContainerArgv(
  target: number,
  ids: { uid: number; gid: number },
  seccompFile: string,
  capabilities: readonly string[],
  command: readonly string[],
): string[] {
  return [
    PYTHON,
    '-I',
    '-S',
    programPath('enter-container.py'),
    String(target),
    String(ids.uid),
    String(ids.gid),
    seccompFile,
    capabilities.join(','),
    ...command,
  ];
}
