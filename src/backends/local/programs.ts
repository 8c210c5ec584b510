import { join } from 'node:path';

/**
 * The runtime's helper programs in other languages, each a checked-in file in programs/ (linted
 * and tested on its own by test/programs.test.ts), run by the host's interpreters.
 *
 * Perl runs the supervisor and the namespace set-up because it is always there (Debian's
 * perl-base is Essential) and starts in about a millisecond without modules: each replaces several
 * processes, and on a small machine the processes a pod spawns are what bounds its start. Python
 * runs what needs libseccomp's binding (the seccomp compiler) or many system calls by name (a
 * shell's entry into a container).
 */
export const PERL = '/usr/bin/perl';
export const PYTHON = '/usr/bin/python3';

/** Every program in programs/. */
export const PROGRAMS = [
  'supervisor.pl',
  'supervisor-launcher.pl',
  'configure-netns.pl',
  'seccomp-compile.py',
  'enter-container.py',
  'join-cgroups.sh',
  'idmapped-mount.pl',
] as const;

export type ProgramName = (typeof PROGRAMS)[number];

/** The path of a helper program. */
export const programPath = (name: ProgramName): string => join(import.meta.dirname, 'programs', name);

/** System call numbers the Perl programs pass to `syscall`, which has none of its own for these. */
export interface SyscallNumbers {
  setns: number;
  setgroups: number;
  unshare: number;
  mount: number;
  umount2: number;
}
