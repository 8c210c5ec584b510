/**
 * Follows one kind of object in the bench's namespace on a cluster of bench/cluster.bench.ts, as a
 * reflector does: listed a page at a time, then watched from the list's resourceVersion; when the
 * watch ends (the API server closes watches after 30–60 min) watched again from the last version
 * seen (bookmarks keep it recent), listed again only when that version is gone (410). A list or
 * watch that fails — a 504 when a list of 1,000 Volcano Jobs outlasted the API server's minute at
 * load 26 — is tried again after a back-off, at most LIST_ATTEMPTS times in a row; then the
 * follower gives up (`gaveUp`), for a blind follower would waste the run.
 */
import { type KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';

const PAGE = 100;
const LIST_ATTEMPTS = 12;
const BACKOFF_MS = [1000, 2000, 4000, 8000, 15_000];

export interface Followed {
  apiVersion: string;
  kind: string;
  /** The kind's resource (its collection's last path segment). */
  plural: string;
}

/** The path of a namespace's collection of `what` (the watch's). */
const collection = (what: Followed, namespace: string) =>
  `/${what.apiVersion.includes('/') ? 'apis' : 'api'}/${what.apiVersion}/namespaces/${namespace}/${what.plural}`;

/** What the followers need of an object: its name, labels and phase. */
export interface Seen {
  metadata: { name: string; labels?: Record<string, string> };
  status?: { phase?: string; state?: { phase?: string } };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Tells `seen` each object of `what` in `namespace` (every version listed or watched) until
 * `stopped` settles or the answer is called; `gaveUp` once LIST_ATTEMPTS lists in a row failed.
 */
export async function followObjects(
  kc: KubeConfig,
  namespace: string,
  what: Followed,
  seen: (object: Seen) => void,
  stopped: Promise<unknown>,
  gaveUp: (why: string) => void,
): Promise<() => void> {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  let done = false;
  let watching: { abort(): void } | undefined;
  const stop = () => {
    done = true;
    watching?.abort();
  };
  void stopped.then(stop);

  /** Every page of the list (one consistent snapshot); answers its resourceVersion. */
  const listAll = async (): Promise<string> => {
    let token: string | undefined;
    // Bounded: a list of N objects has N / PAGE pages; 1,000 pages is 100,000 objects.
    for (let page = 0; page < 1000; page++) {
      const list = (await objects.list(
        what.apiVersion,
        what.kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        PAGE,
        token,
      )) as unknown as { items: Seen[]; metadata: { resourceVersion: string; continue?: string } };
      for (const o of list.items) seen(o);
      token = list.metadata.continue || undefined;
      if (!token) return list.metadata.resourceVersion;
    }
    throw new Error(`more than 1000 pages of ${what.kind}`);
  };

  /** The last resourceVersion seen (an object's or a bookmark's): where a new watch resumes. */
  let version: string | undefined;
  /** Watches from `version`; settles once the watch is open, `ended` is told when it ends. */
  const watch = (ended: (gone: boolean) => void) => {
    let gone = false;
    return new Watch(kc).watch(
      collection(what, namespace),
      { resourceVersion: version, allowWatchBookmarks: true },
      (type, o: Seen & { code?: number; metadata: { resourceVersion?: string } }) => {
        // 410: the version was compacted away: only a new list can say what changed meanwhile.
        if (type === 'ERROR') gone ||= o.code === 410;
        else {
          version = o.metadata.resourceVersion ?? version;
          if (type !== 'BOOKMARK') seen(o);
        }
      },
      (err: { statusCode?: number } | null) => ended(gone || err?.statusCode === 410),
    );
  };

  /**
   * Lists (when there is no version to resume from, or it is gone), then watches; when the watch
   * ends it resumes from the last version seen — a list of thousands of Volcano Jobs outlasts the
   * API server's minute under load (504), a watch does not.
   */
  const follow = async (relist: boolean): Promise<void> => {
    let lastError: unknown;
    for (let attempt = 0; attempt < LIST_ATTEMPTS && !done; attempt++) {
      if (attempt > 0) await wait(BACKOFF_MS[Math.min(attempt - 1, BACKOFF_MS.length - 1)]!);
      if (done) return;
      try {
        if (relist || version === undefined) {
          version = await listAll();
          relist = false;
        }
        if (done) return;
        watching = await watch((gone) => void wait(1000).then(() => follow(gone)));
        return;
      } catch (e) {
        lastError = e;
        console.error(
          `${what.kind}: following failed (attempt ${attempt + 1} of ${LIST_ATTEMPTS}):`,
          (e as Error).message,
        );
      }
    }
    if (!done) gaveUp(`the ${what.kind} follower gave up: ${(lastError as Error)?.message ?? lastError}`);
  };
  await follow(true);
  return stop;
}

/** The Volcano Jobs of the bench's namespace. */
export const VOLCANO_JOBS: Followed = {
  apiVersion: 'batch.volcano.sh/v1alpha1',
  kind: 'Job',
  plural: 'jobs',
};

/** The pods of the bench's namespace. */
export const PODS: Followed = { apiVersion: 'v1', kind: 'Pod', plural: 'pods' };

/** The Volcano Job a pod belongs to (Volcano's label). */
export const volcanoJobOf = (pod: Seen) => pod.metadata.labels?.['volcano.sh/job-name'];
