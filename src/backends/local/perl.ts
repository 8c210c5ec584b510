/**
 * What the runtime's Perl helpers (the supervisor, the namespace set-up) share. Perl runs them
 * because it is always there (Debian's perl-base is Essential) and starts in about a millisecond
 * without modules: each replaces several processes, and on a small machine the processes a pod
 * spawns are what bounds its start.
 */
export const PERL = '/usr/bin/perl';

/** setns(2)'s number for Perl's `syscall`: x86-64's, and the generic table's (arm64, riscv64). */
const SETNS_NUMBERS: Partial<Record<NodeJS.Architecture, number>> = { x64: 308, arm64: 268, riscv64: 268 };

/** setns(2)'s number on this machine; an error names the architecture it is not known for. */
export function setnsNumber(): number {
  const number = SETNS_NUMBERS[process.arch];
  if (number === undefined) throw new Error(`setns's system call number is not known on ${process.arch}`);
  return number;
}

/** setns's nstype for a network namespace (CLONE_NEWNET). */
export const CLONE_NEWNET = 0x40000000;
