import type { ContainerExit } from '../runtime.ts';

/**
 * The sentences a failed container leaves in the job's updates, as `kubectl describe` shows a
 * pod's last state: how it ended (code, signal, OOM kill, sandbox) and the last lines it wrote to
 * stderr, which otherwise sit in a file under the server's data folder. Pure functions of what
 * was observed.
 */

/** Lines of stderr that say why, at most. */
export const REASON_LINES = 5;

/** The last `count` non-empty lines of a text. */
export function lastLines(text: string, count: number): string[] {
  return text
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line !== '')
    .slice(-count);
}

/** A line of stderr quoted in a reason is cut to this many characters. */
const QUOTED_LINE_CHARS = 200;

/** How a container ended, in words: its sandbox's failure, the OOM killer, a signal or its exit code. */
export function howItEnded(exit: ContainerExit): string {
  if (exit.sandboxFailure) return `could not run: its sandbox failed: ${exit.sandboxFailure}`;
  if (exit.oomKilled) return 'exceeded its memory limit (OOM-killed)';
  if (exit.signal) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.exitCode}`;
}

/** The last non-empty lines of `stderr`, each cut short, joined with " / "; '' when it said nothing. */
export function lastWords(stderr: string): string {
  return lastLines(stderr, REASON_LINES)
    .map((line) => (line.length > QUOTED_LINE_CHARS ? `${line.slice(0, QUOTED_LINE_CHARS)}…` : line))
    .join(' / ');
}

/**
 * Why rank `rank` did not start: its init container `name` ended with `exit`; `stderr` is the end
 * of what it wrote there (a sandbox failure already carries the sandbox's own words).
 */
export function initContainerFailure(
  rank: number,
  name: string,
  exit: ContainerExit,
  stderr: string,
): string {
  const words = exit.sandboxFailure ? '' : lastWords(stderr);
  return `Rank ${rank} failed to start: init container ${name} ${howItEnded(exit)}${words ? `; its stderr ends: ${words}` : ''}`;
}
