import { createHash } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { createServer } from 'node:net';

/**
 * Makes this process the only user of a local state folder: two processes on one folder would
 * resume each other's jobs and remove each other's pods. The lock is an abstract unix socket named
 * after the folder's real path: binding it is exclusive, and the kernel releases it when the
 * process ends, however it ends, so a crash never leaves a stale lock. Resolves with its release.
 */
export async function lockStateDir(dir: string): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true });
  const path = await realpath(dir);
  const name = `\0ucompute-state-${createHash('sha256').update(path).digest('hex').slice(0, 32)}`;
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(
              `the local state folder ${path} is in use by another ucompute process (serve or vcjob run); stop it, or give this one another data folder`,
            )
          : error,
      ),
    );
    server.listen(name, resolve);
  });
  // The lock never keeps the process alive by itself.
  server.unref();
  return () => new Promise<void>((resolve) => server.close(() => resolve()));
}
