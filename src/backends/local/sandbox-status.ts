import { readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { lastLines, REASON_LINES } from './controller/failure-reasons.ts';
import { CGROUP_JOIN_FAILED } from './supervisor.ts';

/**
 * Whether a container's command ran at all. Bubblewrap writes JSON documents to its status file:
 * `{"child-pid": …}` when it starts, `{"exit-code": N}` only when the command it ran ended. A status
 * without an exit code, and no signal, means the sandbox (or the supervisor before it) failed:
 * the exit status is then bubblewrap's, never the application's.
 */

/** How much of the end of the container's stderr is read for the reason. */
const TAIL_BYTES = 8192;
/**
 * Why the sandbox failed, or null when the command ran (or was killed: a signal's exit is its own).
 * `status`: the supervisor's exit record; `statusFile`: bubblewrap's status file's text, null when
 * the supervisor never created it; `stderr`: the end of the container's stderr.
 */
export function sandboxFailure(status: number, statusFile: string | null, stderr: string): string | null {
  if (statusFile === null) {
    return status === CGROUP_JOIN_FAILED ? "the supervisor could not join the pod's cgroups" : null;
  }
  if (/"exit-code"\s*:/.test(statusFile) || status >= 128) return null;
  const lines = lastLines(stderr, 50);
  // bubblewrap's and the supervisor's own complaints say it best; else whatever came last.
  const own = lines.filter((line) => /^(bwrap|ucompute-supervisor): /.test(line));
  const why = (own.length > 0 ? own : lines).slice(-REASON_LINES).join(' / ');
  return why === '' ? `the sandbox failed (status ${status}) and said nothing` : why;
}

/** The last `bytes` of a file ('' when it cannot be read). */
export async function fileTail(path: string, bytes = TAIL_BYTES): Promise<string> {
  const file = await open(path, 'r').catch(() => null);
  if (!file) return '';
  try {
    const { size } = await file.stat();
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    await file.read(buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } finally {
    await file.close();
  }
}

/** `sandboxFailure` for a container whose bubblewrap status file is `statusPath` and whose stderr is `stderrPath`. */
export async function readSandboxFailure(status: number, statusPath: string, stderrPath: string) {
  // Read as every container ends: synchronous, as the pods' small files are (pod/pod.ts).
  let statusFile: string | null = null;
  try {
    statusFile = readFileSync(statusPath, 'utf8');
  } catch {
    // The supervisor never created it.
  }
  if (statusFile !== null && /"exit-code"\s*:/.test(statusFile)) return null;
  return sandboxFailure(status, statusFile, await fileTail(stderrPath));
}
