import { createHash } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Binds the abstract unix socket `name`, or answers null when another process holds it: binding is
 * exclusive, and the kernel releases it when the process ends, however it ends, so a crash never
 * leaves a stale lock. Resolves with its release.
 */
async function tryAbstractLock(name: string): Promise<(() => Promise<void>) | null> {
  const server = createServer((socket) => socket.destroy());
  const bound = await new Promise<boolean>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' ? resolve(false) : reject(error),
    );
    server.listen(`\0${name}`, () => resolve(true));
  });
  if (!bound) return null;
  // The lock never keeps the process alive by itself.
  server.unref();
  return () => new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * Makes this process the only user of a local state folder: two processes on one folder would
 * resume each other's jobs and remove each other's pods. The lock is named after the folder's real path.
 */
export async function lockStateDir(dir: string): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true });
  const path = await realpath(dir);
  const release = await tryAbstractLock(
    `ucompute-state-${createHash('sha256').update(path).digest('hex').slice(0, 32)}`,
  );
  if (release) return release;
  throw new Error(
    `the local state folder ${path} is in use by another ucompute process (serve or vcjob run); stop it, or give this one another data folder`,
  );
}

/**
 * Runs `fn` while no other process on the host (in this network namespace, where abstract sockets
 * live) runs a function under the same lock `name`; waits up to `waitMs` for it.
 */
export async function underHostLock<T>(name: string, fn: () => Promise<T>, waitMs = 30_000): Promise<T> {
  const pollMs = 5;
  for (let waited = 0; waited <= waitMs; waited += pollMs) {
    const release = await tryAbstractLock(`ucompute-${name}`);
    if (release) {
      try {
        return await fn();
      } finally {
        await release();
      }
    }
    await sleep(pollMs);
  }
  throw new Error(`the host-wide lock ucompute-${name} stayed held for ${waitMs / 1000} s`);
}
