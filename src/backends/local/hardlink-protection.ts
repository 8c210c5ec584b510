import { readFile } from 'node:fs/promises';

export const PROTECTED_HARDLINKS = '/proc/sys/fs/protected_hardlinks';

/**
 * Refuses to run jobs unless the kernel's fs.protected_hardlinks is on. Without it any host user,
 * a job's included, may hard-link a file it can neither read nor write (/etc/shadow, the database)
 * into its own folder on the same file system, and the server, as root, would then read it for the
 * job's owner (files API, output copies): O_NOFOLLOW does not see a hard link. Every distribution
 * turns it on by default; ucompute relies on it, so it says so instead of relying silently.
 */
export async function requireProtectedHardlinks(file = PROTECTED_HARDLINKS): Promise<void> {
  const value = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (value !== '1') {
    throw new Error(
      `fs.protected_hardlinks is ${value === '' ? 'unknown' : value}: jobs could hard-link files they cannot read (e.g. /etc/shadow) into their folders for the server to read; turn it on (sysctl -w fs.protected_hardlinks=1, and in /etc/sysctl.d) before running jobs as root`,
    );
  }
}
