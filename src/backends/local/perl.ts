/**
 * What the runtime's Perl helpers (the supervisor, the namespace set-up) share. Perl runs them
 * because it is always there (Debian's perl-base is Essential) and starts in about a millisecond
 * without modules: each replaces several processes, and on a small machine the processes a pod
 * spawns are what bounds its start.
 */
export const PERL = '/usr/bin/perl';

/**
 * System call numbers for Perl's `syscall`, which has none of its own for these: x86-64's, and
 * the generic table's (arm64, riscv64).
 */
const SYSCALLS = {
  setns: { x64: 308, arm64: 268, riscv64: 268 },
  setgroups: { x64: 116, arm64: 159, riscv64: 159 },
} satisfies Record<string, Partial<Record<NodeJS.Architecture, number>>>;

/** The number of a system call on this machine; an error names the architecture it is not known for. */
export function syscallNumber(name: keyof typeof SYSCALLS): number {
  const number = (SYSCALLS[name] as Partial<Record<NodeJS.Architecture, number>>)[process.arch];
  if (number === undefined) throw new Error(`${name}'s system call number is not known on ${process.arch}`);
  return number;
}

/** setns's nstype for a network namespace (CLONE_NEWNET). */
export const CLONE_NEWNET = 0x40000000;
