import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { compiledSeccomp } from '../src/backends/local/seccomp.ts';
import { decide } from './support/classic-bpf.ts';
import { needs } from './support/local-tools.ts';

/** The containers' compiled seccomp program (programs/seccomp-compile.py), read as the kernel reads it. */

/** AUDIT_ARCH_X86_64 and AUDIT_ARCH_I386 (<linux/audit.h>). */
const X86_64 = 0xc000003e;
const I386 = 0x40000003;
const ALLOW = 0x7fff0000;
/** SECCOMP_RET_ERRNO with the errno in the low bits. */
const errno = (n: number) => 0x00050000 | n;

test('the seccomp program finds any system call in a few dozen instructions (a tree, not a list) and gives the profile’s verdicts', {
  ...(await needs('python3')),
  skip: process.arch === 'x64' ? undefined : 'x86-64 numbers',
}, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-seccomp-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const compiled = await compiledSeccomp(dir);
  const program = await readFile(compiled.program);
  // The kernel runs the program for every number of each architecture as it loads it, in every
  // container's start, with interrupts off: compared one by one, ~350 allowed calls took up to
  // 598 instructions for one number (measured: ~2 ms a load here, ~0.7 ms as a tree).
  let longest = 0;
  for (const arch of [X86_64, I386]) {
    for (let nr = 0; nr < 512; nr++) longest = Math.max(longest, decide(program, arch, nr).steps);
  }
  assert.ok(longest <= 40, `at most 40 instructions for any number, ${longest} for one`);
  // The same verdicts: read and write allowed, mount refused with EPERM, clone3 with ENOSYS (libc
  // falls back to clone), clone and socket decided by their arguments, another architecture refused.
  assert.equal(decide(program, X86_64, 0).verdict, ALLOW);
  assert.equal(decide(program, X86_64, 1).verdict, ALLOW);
  assert.equal(decide(program, X86_64, compiled.syscalls.mount).verdict, errno(1));
  assert.equal(decide(program, X86_64, 435).verdict, errno(38));
  assert.equal(decide(program, X86_64, 56).verdict, null, 'clone: by its flags');
  assert.equal(decide(program, X86_64, 41).verdict, null, 'socket: by its family');
  assert.equal(decide(program, I386, 3).verdict, ALLOW, "i386's read");
  assert.equal(decide(program, I386, 21).verdict, errno(1), "i386's mount");
  assert.notEqual(decide(program, 0xc00000b7, 0).verdict, ALLOW, 'arm64 is not an architecture it allows');
});
