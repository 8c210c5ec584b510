import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';
import { PYTHON, programPath, type SyscallNumbers } from './programs.ts';
import { ALLOWED_SYSCALLS, ARGUMENT_RULES, ERRNO_SYSCALLS } from './seccomp-profile.ts';

export const SECCOMP_MISSING =
  "the seccomp profile could not be compiled: install Debian's python3-seccomp (libseccomp's Python binding)";

/** The containers' seccomp program, and the system call numbers the supervisor needs, from libseccomp by name. */
export interface CompiledSeccomp {
  /** The BPF program bubblewrap loads (`--seccomp FD`). */
  program: string;
  syscalls: SyscallNumbers;
}

/**
 * Compiles the seccomp profile with libseccomp, through its Python binding (Debian's
 * python3-seccomp; programs/seccomp-compile.py). The program lies under `dir`, named by a hash of
 * the profile and the compiler, so a changed profile is compiled again and an unchanged one is not.
 */
export async function compiledSeccomp(dir: string): Promise<CompiledSeccomp> {
  const compiler = programPath('seccomp-compile.py');
  const resolve: (keyof SyscallNumbers)[] = ['setns', 'setgroups', 'unshare', 'mount', 'umount2'];
  const profile = JSON.stringify({
    allowed: ALLOWED_SYSCALLS,
    arguments: ARGUMENT_RULES,
    errno: ERRNO_SYSCALLS,
    resolve,
  });
  const hash = createHash('sha256')
    .update(profile)
    .update(await readFile(compiler))
    .digest('hex')
    .slice(0, 16);
  const program = join(dir, `seccomp-${hash}.bpf`);
  const numbers = join(dir, `seccomp-${hash}.json`);
  const compiled = await stat(program).then(
    (s) => s.size > 0,
    () => false,
  );
  if (compiled) {
    const syscalls = await readFile(numbers, 'utf8').then(
      (text) => JSON.parse(text) as SyscallNumbers,
      () => null,
    );
    if (syscalls) return { program, syscalls };
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  let output: string;
  try {
    output = await run(PYTHON, ['-I', compiler, `${program}.new`], profile);
  } catch (error) {
    throw new Error(`${SECCOMP_MISSING} (${(error as Error).message.split('\n').at(-1)})`);
  }
  const syscalls = JSON.parse(output) as SyscallNumbers;
  await writeFile(`${numbers}.new`, output);
  await rename(`${numbers}.new`, numbers);
  await rename(`${program}.new`, program);
  return { program, syscalls };
}
