import { AsyncLocalStorage } from 'node:async_hooks';
import type { Readable, Writable } from 'node:stream';

/** Output as a terminal or a pipe: the TTY fields are there only for a terminal. */
export type CliOutput = Writable & { isTTY?: boolean; columns?: number; rows?: number };

/**
 * Where a command reads its settings and input and writes its output: the process's own for
 * `bin/ucompute.js`, or a caller's when `main()` runs inside another program (the tests run the
 * usage, option and output checks in their own process, a child costing most of a CPU second).
 */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdin: Readable & { isTTY?: boolean; setRawMode?(raw: boolean): unknown };
  stdout: CliOutput;
  stderr: CliOutput;
}

/** The process's own; getters, because reading `process.stdin` opens it. */
export const PROCESS_IO: CliIo = {
  get env() {
    return process.env;
  },
  get stdin() {
    return process.stdin;
  },
  get stdout() {
    return process.stdout;
  },
  get stderr() {
    return process.stderr;
  },
};

// Carried along the command's asynchronous calls, so that the modules of every command need not pass it on.
const current = new AsyncLocalStorage<CliIo>();

/** The input, output and environment of the command running here. */
export function cliIo(): CliIo {
  return current.getStore() ?? PROCESS_IO;
}

/** Runs `command` with `io` as what `cliIo()` answers within it. */
export function withCliIo<T>(io: CliIo, command: () => Promise<T>): Promise<T> {
  return current.run(io, command);
}
