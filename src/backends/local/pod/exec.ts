import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { ExecResult } from '../runtime.ts';
import type { ContainerHandle } from './container-handle.ts';
import type { PodContext, PodRecord } from './context.ts';
import { containerEntry } from './shell.ts';

/** What is kept of an exec's output (the kubelet keeps about as much of a probe's). */
const OUTPUT_BYTES = 1024;

/**
 * Runs `command` to its end in a running container (`runc exec`, the kubelet's exec probe),
 * entered as a shell enters it (shell.ts); aborting `signal` kills its process group.
 */
export async function execInContainer(
  context: PodContext,
  record: PodRecord,
  name: string,
  container: ContainerHandle | undefined,
  command: readonly string[],
  signal: AbortSignal,
): Promise<ExecResult> {
  if (!container || container.ended)
    throw new Error(`pod ${record.spec.name} has no running container ${name}`);
  const entry = await containerEntry(context, record, container, command);
  signal.throwIfAborted();
  return new Promise<ExecResult>((resolve, reject) => {
    const child = spawn(entry.file, entry.args, {
      cwd: entry.cwd,
      env: entry.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const chunks: Buffer[] = [];
    let kept = 0;
    const keep = (chunk: Buffer) => {
      if (kept < OUTPUT_BYTES) chunks.push(chunk.subarray(0, OUTPUT_BYTES - kept));
      kept += chunk.length;
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const abort = () => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {} // already gone
      }
      reject(signal.reason);
    };
    signal.addEventListener('abort', abort, { once: true });
    child.once('error', (error) => {
      signal.removeEventListener('abort', abort);
      reject(new Error(`could not run ${command[0]} in container ${container.spec.name}: ${error.message}`));
    });
    child.once('close', (code, killedBy) => {
      signal.removeEventListener('abort', abort);
      resolve({
        exitCode: code ?? 128 + (killedBy ? (constants.signals[killedBy] ?? 0) : 0),
        output: Buffer.concat(chunks).toString('utf8'),
      });
    });
  });
}
