import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.ts';
import { cliIo } from './io.ts';

/** The example catalogue and products shipped with ucompute: the embedded defaults. */
export const EXAMPLE_APPS = fileURLToPath(new URL('../../examples/apps', import.meta.url));
export const EXAMPLE_PRODUCTS = fileURLToPath(new URL('../../examples/products.yml', import.meta.url));

/**
 * The configuration without a file: the local backend, where root in a container is mapped to an
 * unprivileged host range by the pod's user namespace, so the example catalogue's mpi-hello (its
 * sshd needs root) may run. Host paths, host network and privileged containers stay refused.
 */
export const EMBEDDED_CONFIG: Config = { security: { allowRootApps: true } };

export const DEFAULT_PORT = 7080;
export const ADMIN_USER = 'local';
export const ADMIN_TOKEN_FILE = 'admin.token';

/**
 * `$UCOMPUTE_DATA_DIR`; as root `/var/lib/ucompute` (a system service's place: the sandbox's
 * unprivileged container users must pass through its parents, which root's home does not let them);
 * else `$XDG_DATA_HOME/ucompute`, else `~/.local/share/ucompute`.
 */
export function defaultDataDir(): string {
  const { env } = cliIo();
  if (env.UCOMPUTE_DATA_DIR) return env.UCOMPUTE_DATA_DIR;
  if (process.getuid?.() === 0) return '/var/lib/ucompute';
  const xdg = env.XDG_DATA_HOME || join(env.HOME || homedir(), '.local', 'share');
  return join(xdg, 'ucompute');
}

/** `$XDG_CACHE_HOME/ucompute`, else `~/.cache/ucompute`: what is kept only to be reused. */
export function defaultCacheDir(): string {
  const { env } = cliIo();
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'ucompute');
}
