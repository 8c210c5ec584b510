import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { normalisePath } from '../model/paths.ts';
import type { JobStorage } from './job-storage.ts';

/**
 * Storage ("UCloud/Storage") backed by one directory: the drive path `/home/alice/x` is
 * `<root>/home/alice/x`. Paths are normalised first, so nothing escapes the root.
 */
export function directoryStorage(root: string): JobStorage & { resolve(path: string): string } {
  const resolve = (path: string): string => {
    const normalised = normalisePath(path);
    if (normalised === undefined) throw new Error(`not a storage path: ${path}`);
    return join(root, normalised);
  };
  return {
    resolve,
    async ensureFolder(path) {
      await mkdir(resolve(path), { recursive: true });
    },
    async writeFile(path, content) {
      // Write beside, then rename: a crash never leaves half a file.
      const target = resolve(path);
      const temporary = `${target}.${process.pid}.tmp`;
      await writeFile(temporary, content);
      await rename(temporary, target);
    },
  };
}
