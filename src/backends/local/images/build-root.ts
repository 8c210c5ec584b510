import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../exec.ts';

/**
 * How old a cached build root may be. Installing Debian's essential packages, apt and a stage's
 * packages takes most of an image build's time (~30 CPU s); a build stage starts from a tarball of
 * that root instead, made at most this long ago, so the stage's packages are at most a day behind
 * the mirror (the image's own packages are always installed afresh).
 */
export const BUILD_ROOT_MAX_AGE_MS = 24 * 60 * 60_000;

/**
 * The tarball of a Debian `suite` root (mmdebstrap's minbase with `packages`) in `cache`, named by
 * what makes it; made when it is missing or older than BUILD_ROOT_MAX_AGE_MS. Concurrent builds
 * may both make it: each writes a file of its own and renames it into place.
 */
export async function buildRoot(cache: string, suite: string, packages: readonly string[]): Promise<string> {
  const now = Date.now();
  const wanted = [...new Set(packages)].sort();
  const key = createHash('sha256')
    .update(JSON.stringify({ suite, packages: wanted }))
    .digest('hex');
  const file = join(cache, `${key}.tar`);
  const made = await stat(file).catch(() => null);
  if (made && now - made.mtimeMs < BUILD_ROOT_MAX_AGE_MS) return file;
  await mkdir(cache, { recursive: true, mode: 0o700 });
  await removeStale(cache, now);
  const partial = `${file}.${randomBytes(6).toString('hex')}.partial`;
  try {
    await run('mmdebstrap', [
      '--variant=minbase',
      ...(wanted.length ? [`--include=${wanted.join(',')}`] : []),
      '--quiet',
      // No device files: a build stage gets /dev mounted, and unpacking needs no privilege then.
      '--skip=output/dev',
      // A stage's `run` finds the package lists as it did when mmdebstrap made its root afresh.
      '--skip=cleanup/apt/lists',
      '--format=tar',
      suite,
      partial,
    ]);
    await rename(partial, file);
  } finally {
    await rm(partial, { force: true });
  }
  return file;
}

/** Removes the cache's roots (and builds left unfinished) older than BUILD_ROOT_MAX_AGE_MS. */
async function removeStale(cache: string, now: number): Promise<void> {
  for (const name of await readdir(cache)) {
    const path = join(cache, name);
    const made = await stat(path).catch(() => null);
    if (made && now - made.mtimeMs >= BUILD_ROOT_MAX_AGE_MS) await rm(path, { force: true });
  }
}
