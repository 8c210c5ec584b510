import type { FileHandle } from 'node:fs/promises';
import { formatBytes } from '../../../model/bytes.ts';
import type { Timer } from '../../../model/clock.ts';
import { diskUse, openFolder } from '../../../storage/folders.ts';
import { isFinalPhase } from '../../../volcano/api/phases.ts';
import { OUTPUT_FOLDER_ANNOTATION } from '../../../volcano/labels.ts';
import type { LocalContext } from './context.ts';
import type { JobRun } from './job-run.ts';

/**
 * Measures running jobs' folders every `intervalMs` (on the backend's clock); a job whose folder
 * grew past `limitBytes` is ended by `fail` with a fault saying how much it used. Returns the stop.
 */
export function watchDiskUse(
  ctx: LocalContext,
  limitBytes: number,
  intervalMs: number,
  fail: (run: JobRun, fault: string) => Promise<void>,
): () => void {
  /** Jobs whose folder is being measured now: one `du` per job at a time. */
  const measuring = new Set<string>();

  async function check(run: JobRun): Promise<void> {
    const relative = run.job.metadata.annotations?.[OUTPUT_FOLDER_ANNOTATION];
    if (relative === undefined || run.phase !== 'Running' || measuring.has(run.id)) return;
    measuring.add(run.id);
    let folder: FileHandle | undefined;
    try {
      folder = await openFolder(ctx.volumes.storageRoot, relative, { create: true });
      const used = await diskUse(folder);
      if (used > limitBytes && !isFinalPhase(run.phase)) {
        // Just past the limit both round alike ("1.0 MiB of its 1.0 MiB"): then in bytes, which
        // show the excess.
        const [usedText, limitText] = [formatBytes(used), formatBytes(limitBytes)];
        const [usedShown, limitShown] =
          usedText === limitText ? [`${used} B`, `${limitBytes} B`] : [usedText, limitText];
        await fail(run, `The job used ${usedShown} of its ${limitShown} disk limit in its job folder`);
      }
    } catch (err) {
      ctx.log?.warn({ err, jobId: run.id }, 'could not measure the disk use of a job folder');
    } finally {
      measuring.delete(run.id);
      await folder?.close();
    }
  }

  let timer: Timer;
  const arm = () => {
    timer = ctx.clock.setTimeout(() => {
      for (const run of ctx.runs.values()) void check(run);
      arm();
    }, intervalMs);
  };
  arm();
  return () => timer.cancel();
}
