import { setTimeout as sleep } from 'node:timers/promises';
import type { Watch } from '@kubernetes/client-node';

export interface FollowOptions<S> {
  /** What is followed, for messages: "Volcano Jobs". */
  what: string;
  watch: Watch;
  /** The collection's path, e.g. `/api/v1/pods` or `/api/v1/namespaces/x/pods`. */
  path: string;
  labelSelector: string;
  /** Lists the collection page by page, handing over each page's items; answers the version to watch from. */
  list(page: (items: unknown[]) => void): Promise<string>;
  /** The few fields kept of an object; undefined ignores it. */
  summarize(object: unknown): S | undefined;
  changed(key: string, now: S): void;
  deleted(key: string, last: S): void;
  /** A failed list or watch; following goes on after a pause. */
  failed(error: unknown): void;
}

export interface Follower<S> {
  /** Resolves after the first complete list; rejects if that list failed (following retries). */
  readonly ready: Promise<void>;
  readonly items: ReadonlyMap<string, S>;
  /** How many times `items` has changed (an item set or deleted): a key for what is made of them. */
  readonly changes: number;
  stop(): void;
}

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 30_000;
const QUICK_END_MS = 200;

/**
 * One list-then-watch loop for one kind (client-go's reflector): list, watch from the list's
 * resource version, resume from the last version seen when the watch ends, and list again when
 * the server says the version is gone (410) or after an error. Only summaries are kept.
 */
export function follow<S>(o: FollowOptions<S>): Follower<S> {
  const items = new Map<string, S>();
  let changes = 0;
  let stopped = false;
  const stopping = new AbortController();
  let current: AbortController | undefined;
  let readyResolve!: () => void;
  let readyReject!: (e: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    readyResolve = resolve;
    readyReject = reject;
  });
  ready.catch(() => {}); // observed by whoever awaits it; not an unhandled rejection meanwhile
  let first = true;

  const keyOf = (object: { metadata?: { namespace?: string; name?: string } }) =>
    `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;

  /** Lists everything again: what the list no longer has was deleted meanwhile. */
  async function relist(): Promise<string> {
    const seen = new Set<string>();
    const resourceVersion = await o.list((page) => {
      for (const object of page as { metadata?: { namespace?: string; name?: string } }[]) {
        const summary = o.summarize(object);
        if (summary === undefined) continue;
        const key = keyOf(object);
        seen.add(key);
        items.set(key, summary);
        changes++;
        o.changed(key, summary);
      }
    });
    for (const [key, last] of items) {
      if (seen.has(key)) continue;
      items.delete(key);
      changes++;
      o.deleted(key, last);
    }
    return resourceVersion;
  }

  /** Watches until the stream ends; answers the version to resume from ('' to list again). */
  function watchOnce(resourceVersion: string): Promise<string> {
    let version = resourceVersion;
    return new Promise<string>((resolve, reject) => {
      o.watch
        .watch(
          o.path,
          { resourceVersion, labelSelector: o.labelSelector, allowWatchBookmarks: true },
          (type, object) => {
            if (type === 'ERROR') {
              // The server closes the stream after an error: a 410 means the version is gone.
              if (object?.code === 410) version = '';
              return;
            }
            const v = object?.metadata?.resourceVersion;
            if (version !== '' && typeof v === 'string') version = v;
            if (type === 'BOOKMARK') return;
            const key = keyOf(object);
            if (type === 'DELETED') {
              const last = items.get(key);
              if (last === undefined) return;
              items.delete(key);
              changes++;
              o.deleted(key, last);
              return;
            }
            const summary = o.summarize(object);
            if (summary === undefined) return;
            items.set(key, summary);
            changes++;
            o.changed(key, summary);
          },
          (error: unknown) => {
            current = undefined;
            const code = (error as { statusCode?: number } | null)?.statusCode;
            if (code === 410) resolve('');
            else if (error && (error as Error).name !== 'TimeoutError' && !stopped) reject(error);
            else resolve(version);
          },
        )
        .then((controller) => {
          current = controller;
          if (stopped) controller.abort();
        }, reject);
    });
  }

  const pause = (ms: number) => sleep(ms, undefined, { signal: stopping.signal }).catch(() => {});

  (async () => {
    let resourceVersion = '';
    let failures = 0;
    while (!stopped) {
      try {
        if (resourceVersion === '') {
          resourceVersion = await relist();
          if (stopped) return;
          if (first) {
            first = false;
            readyResolve();
          }
        }
        const started = performance.now();
        resourceVersion = await watchOnce(resourceVersion);
        failures = 0;
        // A server that ends watches at once must not turn this loop into a busy one.
        if (performance.now() - started < QUICK_END_MS) await pause(QUICK_END_MS);
      } catch (error) {
        if (stopped) return;
        if (first) readyReject(new Error(`could not list ${o.what}: ${(error as Error).message}`));
        o.failed(error);
        failures++;
        resourceVersion = '';
        await pause(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (failures - 1)));
      }
    }
  })();

  return {
    ready,
    items,
    get changes() {
      return changes;
    },
    stop() {
      stopped = true;
      stopping.abort();
      current?.abort();
    },
  };
}
