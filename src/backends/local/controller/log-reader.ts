import { StringDecoder } from 'node:string_decoder';
import type { LogChunk } from '../../../jobs/backend.ts';
import { isFinalPhase } from '../../../volcano/api/phases.ts';
import { totalReplicas } from '../../../volcano/emulation/job-controller.ts';
import { LOG_CHUNK_BYTES, type LogCursor, readLogChunk } from '../log-files.ts';
import type { LocalContext } from './context.ts';
import { type JobRun, logFile, rankContainers } from './job-run.ts';

/** How often a followed job's files are read again when they had nothing new. */
const LOG_POLL_MS = 100;

/**
 * Every rank's output in chunks of at most 64 KiB, each container's files from the oldest kept
 * byte; pulled by the reader, so that a slow one holds one chunk, not the log. Following, it
 * reads again until the job ends, the signal aborts or the backend closes.
 */
export async function* readLogs(
  ctx: LocalContext,
  run: JobRun,
  follow: boolean,
  signal?: AbortSignal,
): AsyncGenerator<LogChunk> {
  const cursors = new Map<string, LogCursor | null>();
  const decoders = new Map<string, StringDecoder>();
  const buffer = Buffer.allocUnsafe(LOG_CHUNK_BYTES);
  for (;;) {
    const finished = isFinalPhase(run.phase);
    let progressed = false;
    for (let rank = 0; rank < totalReplicas(run.job); rank++) {
      for (const container of rankContainers(run, rank)) {
        for (const stream of ['out', 'err'] as const) {
          const file = logFile(ctx.jobsDir, run.id, rank, container, stream);
          const chunk = await readLogChunk(file, ctx.rotation.maxFiles, cursors.get(file) ?? null, buffer);
          if (!chunk) continue;
          cursors.set(file, chunk.cursor);
          progressed = true;
          const decoder = decoders.get(file) ?? new StringDecoder('utf8');
          decoders.set(file, decoder);
          const text = decoder.write(chunk.bytes);
          if (text) yield { rank, ...(stream === 'out' ? { stdout: text } : { stderr: text }) };
          if (signal?.aborted) return;
        }
      }
    }
    if (progressed) continue;
    if (!follow || finished || signal?.aborted || ctx.closed) return;
    await Promise.race([
      run.ended,
      new Promise((resolve) => setTimeout(resolve, LOG_POLL_MS)),
      new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true })),
    ]);
  }
}
