import { chmod, mkdir, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../model/clock.ts';
import { createRuntime } from './create-runtime.ts';
import { imageResolver } from './images/resolve.ts';
import { imageStoreDir, openImageStore } from './images/store.ts';
import { type LocalBackend, localBackend } from './local-backend.ts';
import { DEFAULT_LOGS } from './pod/context.ts';
import type { Runtime } from './runtime.ts';
import type { LocalSettings } from './settings.ts';
import { lockStateDir } from './state-lock.ts';

export interface OpenLocalOptions {
  config: LocalSettings;
  /** Default home of the state folder. */
  dataDir: string;
  storageRoot: string;
  storageClaim: string;
  /**
   * Running on the embedded defaults (no configuration file): images missing from the store then
   * fall back to the host userland view unless `local.hostUserland` says otherwise.
   */
  embedded: boolean;
  /** The server's listen address, where jobs' SSH ports are bound (default 127.0.0.1). */
  listen?: string;
  /** What the backend reads the time from and waits on; the machine's by default. */
  clock?: Clock;
  log?: Logger;
}

/**
 * The local backend as the configuration describes it, with its runtime; it holds its state
 * folder's lock until closed, so a second process on the same folder is refused.
 */
export async function openLocalBackend(
  o: OpenLocalOptions,
): Promise<LocalBackend & Pick<Runtime, 'warnings' | 'description' | 'hostNames'>> {
  const stateDir = o.config.stateDir ?? join(o.dataDir, 'local');
  const unlock = await lockStateDir(stateDir);
  try {
    const backend = await openLocked(o, stateDir);
    const close = backend.close;
    return Object.assign(backend, {
      async close() {
        try {
          await close();
        } finally {
          await unlock();
        }
      },
    });
  } catch (error) {
    await unlock();
    throw error;
  }
}

async function openLocked(o: OpenLocalOptions, stateDir: string) {
  const capacity = o.config.capacity;
  // Bubblewrap binds job folders, inputs and pod files by path as the container's host user (an
  // unprivileged id), so the data and state folders must let others pass (not list): 0711 at least.
  for (const folder of [o.dataDir, stateDir]) {
    await mkdir(folder, { recursive: true });
    await chmod(folder, (await stat(folder)).mode | 0o111);
  }
  if (process.getuid?.() === 0 && !o.config.unsandboxed) {
    for (const folder of [stateDir, o.storageRoot]) await checkPassable(folder);
  }
  const logs = { ...DEFAULT_LOGS, ...o.config.logs };
  const runtime = await createRuntime({
    logs,
    ...(o.config.defaultPids !== undefined ? { defaultPids: o.config.defaultPids } : {}),
    stateDir: join(stateDir, 'runtime'),
    ...(o.config.unsandboxed !== undefined ? { unsandboxed: o.config.unsandboxed } : {}),
    ...(o.config.network ? { network: o.config.network } : {}),
    ...(o.config.userNamespaces?.first !== undefined ? { firstHostId: o.config.userNamespaces.first } : {}),
    ...(o.config.cgroupParent !== undefined ? { cgroupParent: o.config.cgroupParent } : {}),
    dataDir: o.dataDir,
    ...(capacity
      ? {
          capacity: {
            ...(capacity.cpu !== undefined ? { cpuMillis: Math.round(capacity.cpu * 1000) } : {}),
            ...(capacity.memoryInGigs !== undefined
              ? { memoryBytes: Math.round(capacity.memoryInGigs * 2 ** 30) }
              : {}),
          },
        }
      : {}),
  });
  const backend = await localBackend({
    runtime,
    stateDir,
    volumes: {
      storageClaim: o.storageClaim,
      storageRoot: o.storageRoot,
      images: imageResolver({
        folders: o.config.images ?? {},
        store: await openImageStore(imageStoreDir(o.dataDir)),
        hostUserland: o.config.hostUserland ?? o.embedded,
      }),
    },
    logs,
    ...(o.config.retainedLogsBytes !== undefined ? { retainedLogsBytes: o.config.retainedLogsBytes } : {}),
    ...(o.config.gracePeriodMs !== undefined ? { gracePeriodMs: o.config.gracePeriodMs } : {}),
    ...(o.config.diskLimitBytes !== undefined ? { diskLimitBytes: o.config.diskLimitBytes } : {}),
    ...(o.config.diskCheckIntervalMs !== undefined
      ? { diskCheckIntervalMs: o.config.diskCheckIntervalMs }
      : {}),
    ssh: sshSettings(o.config.ssh ?? {}, o.listen ?? '127.0.0.1'),
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.log ? { log: o.log } : {}),
  });
  return Object.assign(backend, {
    warnings: runtime.warnings,
    description: runtime.description,
    hostNames: runtime.hostNames,
  });
}

/** Ports 2200-2299 by default, named by the listen address unless that is every address. */
function sshSettings(ssh: NonNullable<LocalSettings['ssh']>, listen: string) {
  const first = ssh.firstPort ?? 2200;
  const last = ssh.lastPort ?? (ssh.firstPort !== undefined ? first + 99 : 2299);
  if (last < first)
    throw new Error(`local.ssh.lastPort (${last}) must not be below local.ssh.firstPort (${first})`);
  const everywhere = listen === '0.0.0.0' || listen === '::';
  return { ports: { listen, first, last }, host: ssh.host ?? (everywhere ? hostname() : listen) };
}

/**
 * Every folder above `path` must let others pass: containers' host users are unprivileged ids, and
 * bubblewrap binds by path as them. Refused at start, naming the folder, rather than every job failing.
 */
async function checkPassable(path: string): Promise<void> {
  for (let folder = dirname(resolve(path)); ; folder = dirname(folder)) {
    const mode = (await stat(folder)).mode;
    if ((mode & 0o001) === 0) {
      throw new Error(
        `${folder} (mode ${(mode & 0o777).toString(8)}) does not let others pass, which the sandbox needs to reach ${path} as a container's unprivileged host user: put the data folder elsewhere (as root the default is /var/lib/ucompute) or allow it with chmod o+x ${folder}`,
      );
    }
    if (folder === '/') return;
  }
}
