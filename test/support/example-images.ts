/**
 * The README's example images (examples/images/*.yml), built once with `ucompute images build`
 * (mmdebstrap: minutes each) into an image store outside the checkout, kept between runs, and
 * shared read-only by the tests that run them. An image is rebuilt when its recipe changed.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { openImageStore } from '../../src/backends/local/images/store.ts';
import { underHostLock } from '../../src/backends/local/state-lock.ts';
import { assertExit, runCli } from './cli.ts';
import { ROOT } from './paths.ts';

/** The data folder whose `images` holds them; passable by containers' host users (unlike /root). */
export const IMAGE_CACHE = process.env.UCOMPUTE_TEST_IMAGES ?? '/var/cache/ucompute-test-images';

/** How long a test waits for another one's builds. */
const BUILD_WAIT_MS = 60 * 60_000;

/** Builds the recipes (`examples/images/<recipe>.yml`) whose image the cache lacks. */
export async function exampleImages(recipes: readonly string[]): Promise<void> {
  await mkdir(IMAGE_CACHE, { recursive: true, mode: 0o711 });
  // One builder at a time on the host: two tests (or two checkouts) never build the same image twice.
  await underHostLock(
    'test-images',
    async () => {
      const store = await openImageStore(join(IMAGE_CACHE, 'images'));
      for (const recipe of recipes) {
        const file = join(ROOT, 'examples', 'images', `${recipe}.yml`);
        const text = await readFile(file, 'utf8');
        const { name } = parse(text) as { name: string };
        // The store knows images by name: the recipe's hash beside it says which recipe made it.
        const stamp = join(IMAGE_CACHE, `${recipe}.recipe.sha256`);
        const hash = createHash('sha256').update(text).digest('hex');
        const built = await readFile(stamp, 'utf8').catch(() => null);
        if (built === hash && (await store.find(name))) continue;
        assertExit(await runCli(['images', 'build', file, '--data-dir', IMAGE_CACHE]), 0);
        await writeFile(stamp, hash);
      }
    },
    BUILD_WAIT_MS,
  );
}

/** Makes `dataDir`'s image store the cache's (a link: nothing is copied). */
export async function useExampleImages(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true });
  await symlink(join(IMAGE_CACHE, 'images'), join(dataDir, 'images'));
}
