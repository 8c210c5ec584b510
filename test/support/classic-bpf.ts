/**
 * A classic BPF program as the kernel's seccomp sees it when it loads one (seccomp_is_const_allow):
 * run for one architecture and system call number, with arguments unknown. Enough of the
 * instruction set for what libseccomp writes; any other instruction is an error.
 */

/** The program's verdict (null: it reads an argument, so it depends on them) and the instructions run. */
export function decide(program: Buffer, arch: number, nr: number): { verdict: number | null; steps: number } {
  if (program.length % 8 !== 0) throw new Error(`not whole instructions: ${program.length} bytes`);
  let a = 0;
  // Bounded: a classic BPF program only jumps forward.
  for (let pc = 0, steps = 1; pc * 8 < program.length; steps++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program[pc * 8 + 2]!;
    const jf = program[pc * 8 + 3]!;
    const k = program.readUInt32LE(pc * 8 + 4);
    pc++;
    if (code === 0x20) {
      // ld [k]: seccomp_data's nr at 0, arch at 4; the instruction pointer and arguments are unknown.
      if (k === 0) a = nr;
      else if (k === 4) a = arch;
      else return { verdict: null, steps };
    } else if (code === 0x54) a = (a & k) >>> 0;
    else if (code === 0x05) pc += k;
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x25) pc += a > k ? jt : jf;
    else if (code === 0x35) pc += a >= k ? jt : jf;
    else if (code === 0x45) pc += (a & k) !== 0 ? jt : jf;
    else if (code === 0x06) return { verdict: k, steps };
    else throw new Error(`instruction ${pc - 1}: opcode 0x${code.toString(16)} not known here`);
  }
  throw new Error('the program ends without a verdict');
}
