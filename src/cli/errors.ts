import { formatIssue, ValidationError } from '../model/errors.ts';
import { cliIo } from './io.ts';

/** An error the user can act on; `exitCode` 2 means bad input (usage, validation). */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** An error that only a mistake in ucompute's own code makes (its stack trace is worth printing). */
export function isProgrammingError(error: unknown): boolean {
  return (
    error instanceof TypeError ||
    error instanceof ReferenceError ||
    error instanceof RangeError ||
    error instanceof SyntaxError ||
    (error instanceof Error && error.name === 'AssertionError')
  );
}

/** Prints an error for a person and returns the exit code: 2 for bad input, 1 otherwise. */
export function reportError(error: unknown): number {
  if (error instanceof ValidationError) {
    for (const issue of error.issues) cliIo().stderr.write(`error: ${formatIssue(issue)}\n`);
    return 2;
  }
  if (error instanceof CliError) {
    cliIo().stderr.write(`error: ${error.message}\n`);
    return error.exitCode;
  }
  const e = error as NodeJS.ErrnoException;
  if (e?.code === 'ENOENT' && e.path) {
    cliIo().stderr.write(`error: no such file: ${e.path}\n`);
    return 2;
  }
  cliIo().stderr.write(`error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  return 1;
}
