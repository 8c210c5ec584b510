import { createHash } from 'node:crypto';
import { mkdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';
import { ALLOWED_SYSCALLS, ARGUMENT_RULES, ERRNO_SYSCALLS } from './seccomp-profile.ts';

/**
 * Compiles the seccomp profile to the BPF program bubblewrap loads (`--seccomp FD`) with libseccomp,
 * through its Python binding (Debian's python3-seccomp). Syscalls libseccomp does not know on this
 * machine are left out, as Docker does.
 */
const COMPILE = `
import json, sys, seccomp
profile = json.load(sys.stdin)
f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(1))
for arch in (seccomp.Arch.X86, seccomp.Arch.X32):
    try:
        f.add_arch(arch)
    except Exception:
        pass
def add(action, name, *args):
    try:
        f.add_rule(action, name, *args)
    except Exception:
        pass
ops = {"EQ": seccomp.EQ, "NE": seccomp.NE, "MASKED_EQ": seccomp.MASKED_EQ}
for name in profile["allowed"]:
    add(seccomp.ALLOW, name)
for rule in profile["arguments"]:
    op = ops[rule["op"]]
    arg = seccomp.Arg(rule["index"], op, rule["value"], rule["masked"]) if rule["op"] == "MASKED_EQ" else seccomp.Arg(rule["index"], op, rule["value"])
    add(seccomp.ALLOW, rule["syscall"], arg)
for rule in profile["errno"]:
    add(seccomp.ERRNO(rule["errno"]), rule["syscall"])
with open(sys.argv[1], "wb") as out:
    f.export_bpf(out)
`;

export const PYTHON = '/usr/bin/python3';

export const SECCOMP_MISSING =
  "the seccomp profile could not be compiled: install Debian's python3-seccomp (libseccomp's Python binding)";

/**
 * The compiled profile's path under `dir`, named by a hash of the profile (and the compiler), so a
 * changed profile is compiled again and an unchanged one is not.
 */
export async function compiledSeccomp(dir: string): Promise<string> {
  const profile = JSON.stringify({
    allowed: ALLOWED_SYSCALLS,
    arguments: ARGUMENT_RULES,
    errno: ERRNO_SYSCALLS,
  });
  const hash = createHash('sha256').update(profile).update(COMPILE).digest('hex').slice(0, 16);
  const file = join(dir, `seccomp-${hash}.bpf`);
  if (
    await stat(file).then(
      (s) => s.size > 0,
      () => false,
    )
  )
    return file;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    await run(PYTHON, ['-c', COMPILE, `${file}.new`], profile);
  } catch (error) {
    throw new Error(`${SECCOMP_MISSING} (${(error as Error).message.split('\n').at(-1)})`);
  }
  await rename(`${file}.new`, file);
  return file;
}
