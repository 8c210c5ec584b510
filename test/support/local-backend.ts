/** The local backend with its real runtime (bubblewrap, cgroups, a network namespace per pod), for tests. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeBridgeNetwork } from '../../src/backends/local/network.ts';
import { openLocalBackend } from '../../src/backends/local/open.ts';
import type { LocalSettings } from '../../src/backends/local/settings.ts';
import type { BackendEvent, LogChunk } from '../../src/jobs/backend.ts';
import { createJobService } from '../../src/jobs/service.ts';
import type { Clock } from '../../src/model/clock.ts';
import { directoryStorage } from '../../src/storage/directory.ts';
import { env } from './fixtures.ts';
import { sharedHostView } from './host-view.ts';
import { openTestStore } from './store.ts';
import { testNetwork } from './test-network.ts';
import { until } from './until.ts';

/**
 * Opens the backend on `dir` (a new folder, removed afterwards, when left out) on its own bridge
 * (./testNetwork); after the test its jobs are cancelled and it is closed.
 */
export async function openTestBackend(
  t: { after(fn: () => Promise<void>): void },
  o: { dir?: string; config?: LocalSettings; clock?: Clock } = {},
) {
  const home = o.dir ?? (await mkdtemp(join(tmpdir(), 'ucompute-local-')));
  const network = testNetwork(home);
  const { bridge } = network;
  // The process's copy of /etc, not one per backend (see ./host-view.ts); the runtime's state
  // folder is <stateDir>/runtime, the state folder <dir>/local unless configured.
  await sharedHostView(join(o.config?.stateDir ?? join(home, 'local'), 'runtime'));
  const backend = await openLocalBackend({
    config: { gracePeriodMs: 500, network, ...o.config },
    dataDir: home,
    storageRoot: join(home, 'storage'),
    storageClaim: 'ucompute-storage',
    embedded: true,
    ...(o.clock ? { clock: o.clock } : {}),
  });
  const events: BackendEvent[] = [];
  backend.onEvent((e) => void events.push(e));
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await backend.close();
  };
  t.after(async () => {
    if (!closed) {
      for (const id of await backend.knownJobs()) await backend.cancel(id);
      await close();
    }
    await removeBridgeNetwork(bridge);
    if (!o.dir) await rm(home, { recursive: true, force: true });
  });
  const final = (id: string) =>
    events.find((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  const ended = (id: string, ms = 20_000) =>
    until(() => final(id), { describe: `job ${id} ends`, timeout: ms });
  const running = (id: string) =>
    until(() => events.some((e) => e.jobId === id && e.state === 'RUNNING'), { describe: `job ${id} runs` });
  const output = async (id: string) => {
    const chunks: LogChunk[] = [];
    for await (const c of backend.logs(id, { follow: false })) chunks.push(c);
    const byRank: Record<number, string> = {};
    for (const c of chunks) byRank[c.rank] = (byRank[c.rank] ?? '') + (c.stdout ?? '');
    return byRank;
  };
  return { home, backend, events, ended, running, output, close };
}

/**
 * The job service, started, on a test backend (openTestBackend) with an empty in-memory store and
 * the backend's storage folder as the users' drives, monitoring every 50 ms; both on `clock` when
 * given. After the test the service stops before the backend's jobs are cancelled and it closes.
 */
export async function openTestService(
  t: { after(fn: () => Promise<void>): void },
  o: { config?: LocalSettings; requireCredits?: boolean; dir?: string; clock?: Clock } = {},
) {
  const store = await openTestStore();
  let stop = async () => {};
  // Registered before the backend's own: after hooks run in the order they were added.
  t.after(async () => {
    await stop();
    await store.close();
  });
  const local = await openTestBackend(t, {
    ...(o.config === undefined ? {} : { config: o.config }),
    ...(o.dir === undefined ? {} : { dir: o.dir }),
    ...(o.clock ? { clock: o.clock } : {}),
  });
  const storageRoot = join(local.home, 'storage');
  const service = createJobService({
    store,
    env: env(),
    backend: local.backend,
    storage: directoryStorage(storageRoot),
    monitorIntervalMs: 50,
    requireCredits: o.requireCredits ?? true,
    ...(o.clock ? { clock: o.clock } : {}),
  });
  await service.start();
  stop = () => service.stop();
  return { ...local, storageRoot, store, service };
}
