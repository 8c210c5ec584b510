import { type FileHandle, open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { openFolder, writeNewFile } from '../../../storage/folders.ts';
import { totalReplicas } from '../../../volcano/emulation/job-controller.ts';
import { OUTPUT_FOLDER_ANNOTATION } from '../../../volcano/labels.ts';
import { logFileName } from '../../../volcano/names.ts';
import { LOG_CHUNK_BYTES, logParts } from '../log-files.ts';
import type { LocalContext } from './context.ts';
import { type JobRun, logFile, rankContainers } from './job-run.ts';

/**
 * FileOutput: each rank's output into the job folder the build names (stderr beside it when
 * any), as the folder's owner and never through a name the job made: a name the job already used
 * (or planted as a symlink) gets `<name>.1.log` instead, and if that is taken too the copy fails,
 * which becomes the job's fault. At most what the rotation keeps of one stream is copied (the
 * newest part of it).
 */
export async function saveOutput(ctx: LocalContext, run: JobRun): Promise<void> {
  const relative = run.job.metadata.annotations?.[OUTPUT_FOLDER_ANNOTATION];
  if (relative === undefined) return;
  const rotation = ctx.rotation;
  let folder: FileHandle | undefined;
  let rank = 0;
  try {
    folder = await openFolder(ctx.volumes.storageRoot, relative, { create: true });
    for (; rank < totalReplicas(run.job); rank++) {
      for (const [stream, name] of [
        ['out', logFileName(rank)],
        ['err', `stderr-${rank}.log`],
      ] as const) {
        const files = rankContainers(run, rank).map((c) => logFile(ctx.jobsDir, run.id, rank, c, stream));
        const parts = (await Promise.all(files.map((f) => logParts(f, rotation.maxFiles)))).flat();
        const size = parts.reduce((n, p) => n + p.size, 0);
        // A rank that started gets its stdout file even when empty; stderr only when it said something.
        if (parts.length === 0 || (stream === 'err' && size === 0)) continue;
        const cap = rotation.maxSizeBytes * rotation.maxFiles;
        const alternative = name.replace(/\.log$/, '.1.log');
        if (await writeNewFile(folder, name, concatenated(parts, Math.max(0, size - cap)))) continue;
        if (await writeNewFile(folder, alternative, concatenated(parts, Math.max(0, size - cap)))) continue;
        throw new Error(`${name} and ${alternative} already exist in the job folder`);
      }
    }
  } catch (error) {
    run.fault ??= `Could not save the output of rank ${rank}: ${(error as Error).message}`;
  } finally {
    await folder?.close();
  }
}

/** The parts' bytes one after the other, the first `skip` left out, read 64 KiB at a time. */
function concatenated(parts: readonly { path: string }[], skip: number): Readable {
  return Readable.from(
    (async function* () {
      let toSkip = skip;
      for (const part of parts) {
        const handle = await open(part.path, 'r').catch(() => undefined);
        if (!handle) continue; // rotated away meanwhile
        try {
          const { size } = await handle.stat();
          const from = Math.min(toSkip, size);
          toSkip -= from;
          yield* handle.createReadStream({ start: from, highWaterMark: LOG_CHUNK_BYTES, autoClose: false });
        } finally {
          await handle.close();
        }
      }
    })(),
  );
}
