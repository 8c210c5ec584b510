/** The local backend on plain processes (test/support/process-runtime.ts), for the controller's tests. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { imageResolver } from '../../src/backends/local/images/resolve.ts';
import { localBackend } from '../../src/backends/local/local-backend.ts';
import type { BackendEvent, LogChunk } from '../../src/jobs/backend.ts';
import type { Clock } from '../../src/model/clock.ts';
import { processRuntime } from './process-runtime.ts';
import { until } from './until.ts';

/** The backend on a new folder (removed afterwards); after the test its jobs are cancelled and no process is left. */
export async function processBackend(
  t: { after(fn: () => Promise<void>): void },
  capacity?: { cpuMillis: number; memoryBytes: number },
  clock?: Clock,
  /** What the ended jobs' state and logs may hold together (the backend's default otherwise). */
  retainedLogsBytes?: number,
) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-local-'));
  const runtime = processRuntime(join(dir, 'pods'), capacity);
  const backend = await localBackend({
    runtime,
    stateDir: join(dir, 'state'),
    volumes: {
      storageClaim: 'ucompute-storage',
      storageRoot: join(dir, 'storage'),
      images: imageResolver({ folders: {}, store: null, hostUserland: true }),
    },
    gracePeriodMs: 200,
    ...(clock ? { clock } : {}),
    ...(retainedLogsBytes !== undefined ? { retainedLogsBytes } : {}),
  });
  const events: BackendEvent[] = [];
  backend.onEvent((e) => void events.push(e));
  t.after(async () => {
    for (const id of await backend.knownJobs()) await backend.cancel(id);
    await backend.close();
    assert.equal(runtime.live(), 0, 'no process is left behind');
    await rm(dir, { recursive: true, force: true });
  });
  const final = (id: string) =>
    events.find((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  const ended = (id: string) => until(() => final(id), { describe: `job ${id} ends` });
  const logs = async (id: string) => {
    const chunks: LogChunk[] = [];
    for await (const c of backend.logs(id, { follow: false })) chunks.push(c);
    return chunks;
  };
  return { backend, runtime, events, ended, logs, stateDir: join(dir, 'state') };
}
