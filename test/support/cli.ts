/**
 * The real `ucompute` command, run as a child process of this Node for what only a process shows
 * (its exit status, standard input, signals), else run in this process through the same main().
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { main } from '../../src/cli/main.ts';
import { ROOT } from './paths.ts';

export const BIN = join(ROOT, 'bin', 'ucompute.js');

// The test runner's own variables must not make the child think it is a test file. The child's
// compile cache is this process's (as `npm test` sets it), not its own TMPDIR's: a test that gives
// the child a TMPDIR of its own and checks that nothing is left there (vcjob-isolation) found
// bin/ucompute.js's node-compile-cache in it when the suite ran without `npm test`.
const { NODE_TEST_CONTEXT: _context, ...childEnv } = process.env;
export const CHILD_ENV: NodeJS.ProcessEnv = {
  ...childEnv,
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'node-compile-cache'),
};

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** Runs `ucompute <args>` to its end and collects its output and exit code. */
export function runCli(args: string[], { cwd = ROOT, env = CHILD_ENV }: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What is written to it, as text. */
class Collected extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/**
 * Runs `ucompute <args>` in this process: the main() that bin/ucompute.js runs, with `env`, an empty
 * standard input and collected output. A child costs most of a CPU second (Node's start and the
 * modules' load); this costs milliseconds once the modules are loaded. Relative paths are this
 * process's working folder's (the checkout).
 */
export async function runCliHere(
  args: string[],
  { env = CHILD_ENV }: { env?: NodeJS.ProcessEnv } = {},
): Promise<CliResult> {
  const stdout = new Collected();
  const stderr = new Collected();
  const code = await main(args, { env, stdin: Readable.from([]), stdout, stderr });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** Asserts the exit code; the message carries the output, which is what explains a wrong one. */
export function assertExit(result: CliResult, code: number): void {
  assert.equal(result.code, code, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
}
