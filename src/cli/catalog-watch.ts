import { type FSWatcher, watch } from 'node:fs';
import type { Logger } from 'pino';
import { type Catalog, loadCatalog } from '../catalog/catalog.ts';
import { ValidationError } from '../model/errors.ts';

/** Changes closer together than this are read as one (an editor writes a file in several steps). */
const SETTLE_MS = 300;

/**
 * A catalogue that `serve` reloads when a file under its folders changes, without a restart: the
 * object handed to the service stays the same and reads the newest catalogue that loaded cleanly.
 * A change that does not load is logged with its problems, and the catalogue in use stays.
 * `close` stops watching.
 */
export function reloadingCatalog(
  initial: Catalog,
  dirs: readonly string[],
  log: Logger,
): { catalog: Catalog; close: () => void } {
  let current = initial;
  let timer: NodeJS.Timeout | undefined;
  let loading = Promise.resolve();
  const reload = () => {
    loading = loading.then(async () => {
      try {
        current = await loadCatalog(dirs);
        log.info(`catalogue reloaded from ${dirs.join(', ')}: ${current.list().length} applications`);
      } catch (e) {
        const problems =
          e instanceof ValidationError ? e.issues.map((i) => i.message) : [(e as Error).message];
        log.warn(`catalogue not reloaded (the one in use stays):\n${problems.join('\n')}`);
      }
    });
  };
  const watchers: FSWatcher[] = dirs.map((dir) =>
    watch(dir, { recursive: true }, () => {
      clearTimeout(timer);
      timer = setTimeout(reload, SETTLE_MS);
    })
      .on('error', (e) => log.warn(`stopped watching the catalogue folder ${dir}: ${e.message}`))
      // Watching alone does not keep `serve` alive: a start that fails still ends the process.
      .unref(),
  );
  return {
    catalog: {
      list: () => current.list(),
      find: (name, version) => current.find(name, version),
      versions: (name) => current.versions(name),
    },
    close: () => {
      clearTimeout(timer);
      for (const w of watchers) w.close();
    },
  };
}
