/**
 * Follows one kind of object in the bench's namespace on a cluster of bench/cluster.bench.ts:
 * listed a page at a time, then watched from the list's resourceVersion; listed again whenever the
 * watch ends (the API server closes watches after 30–60 min, or a 410 after compaction). A list
 * that fails — a 504 when a list of thousands of Volcano Jobs outlasts the API server's minute
 * under load, a continue token expired (410) — is tried again from its first page after a
 * back-off, at most LIST_ATTEMPTS times in a row; then the follower gives up (`gaveUp`), for a
 * blind follower would waste the run.
 */
import { type KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';

const PAGE = 500;
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
    // Bounded: a list of N objects has N / PAGE pages; 1,000 pages is 500,000 objects.
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

  const follow = async (): Promise<void> => {
    let lastError: unknown;
    for (let attempt = 0; attempt < LIST_ATTEMPTS && !done; attempt++) {
      if (attempt > 0) await wait(BACKOFF_MS[Math.min(attempt - 1, BACKOFF_MS.length - 1)]!);
      if (done) return;
      let version: string;
      try {
        version = await listAll();
      } catch (e) {
        lastError = e;
        console.error(
          `${what.kind} list failed (attempt ${attempt + 1} of ${LIST_ATTEMPTS}):`,
          (e as Error).message,
        );
        continue;
      }
      if (done) return;
      try {
        watching = await new Watch(kc).watch(
          collection(what, namespace),
          { resourceVersion: version, allowWatchBookmarks: true },
          (_type, o: Seen) => seen(o),
          () => void wait(1000).then(() => follow()),
        );
        return;
      } catch (e) {
        lastError = e;
      }
    }
    if (!done) gaveUp(`the ${what.kind} follower gave up: ${(lastError as Error)?.message ?? lastError}`);
  };
  await follow();
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
