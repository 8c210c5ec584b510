import { setTimeout as sleep } from 'node:timers/promises';
import type { KubernetesObject } from '../../volcano/api/types.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL } from '../../volcano/labels.ts';
import { apiMessage, type Connection, statusCode } from './connection.ts';
import { isOrphan, queueIsOpen } from './decisions.ts';

/** The kinds a job's own companions can be; namespaces and queues are shared by an owner's jobs. */
export const JOB_COMPANION_KINDS = [
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'v1', kind: 'Secret' },
  { apiVersion: 'v1', kind: 'ConfigMap' },
] as const;

export const VOLCANO_JOB = { apiVersion: 'batch.volcano.sh/v1alpha1', kind: 'Job' } as const;
export const POD_GROUP = { apiVersion: 'scheduling.volcano.sh/v1beta1', kind: 'PodGroup' } as const;
/** The label selector of every object ucompute made for a job. */
export const OURS = `${MANAGED_BY_LABEL}=${MANAGED_BY},${JOB_ID_LABEL}`;

type Kind = { apiVersion: string; kind: string };

/** How often, and how many times, a new queue is read until Volcano opens it. */
const QUEUE_OPEN_POLL_MS = 100;

/**
 * Creates, finds and deletes the objects of ucompute's jobs on the cluster. Every call is
 * idempotent: creating what exists and deleting what is gone are not errors.
 */
export function jobObjects(conn: Connection, scope: string | undefined) {
  const { objects, leaderObjects } = conn;

  /** One kind's objects carrying the label `selector`, in `namespace` (default: ours), all at once. */
  const listLabelled = (kind: Kind, selector: string, namespace = scope) =>
    objects.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, selector);

  async function createIfAbsent(object: KubernetesObject): Promise<void> {
    try {
      await objects.create(object);
    } catch (e) {
      if (statusCode(e) === 409) return; // it exists: a repeat after a crash, or a shared object
      throw new Error(`could not create ${describe(object)}: ${apiMessage(e)}`);
    }
  }

  /** Deletes through `api`: `leaderObjects` for what only the leader removes (fenced). */
  async function deleteIfPresent(
    api: Connection['objects'],
    object: KubernetesObject,
    graceSeconds?: number,
  ): Promise<void> {
    try {
      await api.delete(object, undefined, undefined, graceSeconds, undefined, 'Background');
    } catch (e) {
      if (statusCode(e) !== 404) throw e;
    }
  }

  return {
    listLabelled,
    createIfAbsent,

    /**
     * Waits (at most one request timeout) until Volcano has opened a queue: its admission webhook
     * refuses jobs for a queue that is not Open yet.
     */
    async waitUntilOpen(queue: KubernetesObject): Promise<void> {
      const deadline = performance.now() + conn.requestTimeoutMs;
      let last: unknown;
      for (;;) {
        const read = (await objects.read(ref(queue, queue))) as { status?: { state?: unknown } };
        if (queueIsOpen(read)) return;
        last = read.status?.state;
        if (performance.now() >= deadline) break;
        await sleep(QUEUE_OPEN_POLL_MS);
      }
      throw new Error(
        `the Volcano queue ${queue.metadata.name} is not open (its state: ${String(last ?? 'none')}); is Volcano's controller running?`,
      );
    },

    /**
     * Deletes the job's Volcano Job (its pods go with it) and its own companions; 404s are fine.
     * `byLeader`: a removal only the leader decides (the job ended, its submission failed), not
     * sent once this replica may no longer lead; a cancel or suspend by any replica's API is not.
     */
    async removeJob(
      jobId: string,
      namespace: string | undefined,
      graceSeconds: number,
      byLeader: boolean,
    ): Promise<void> {
      const api = byLeader ? leaderObjects : objects;
      const selector = `${JOB_ID_LABEL}=${jobId}`;
      const found = await listLabelled(VOLCANO_JOB, selector, namespace);
      for (const job of found.items) await deleteIfPresent(api, ref(VOLCANO_JOB, job), graceSeconds);
      for (const kind of JOB_COMPANION_KINDS) {
        const list = await listLabelled(kind, selector);
        for (const item of list.items) await deleteIfPresent(api, ref(kind, item));
      }
    },

    /** Deletes companions whose job is gone (see isOrphan); answers how many. */
    async deleteOrphans(live: (jobId: string) => boolean, now: number): Promise<number> {
      let deleted = 0;
      for (const kind of JOB_COMPANION_KINDS) {
        const list = await listLabelled(kind, OURS);
        for (const item of list.items) {
          const label = item.metadata?.labels?.[JOB_ID_LABEL];
          const createdAt = new Date(item.metadata?.creationTimestamp ?? 0).getTime();
          if (!isOrphan({ jobId: typeof label === 'string' ? label : undefined, createdAt }, live, now))
            continue;
          await deleteIfPresent(leaderObjects, ref(kind, item));
          deleted++;
        }
      }
      return deleted;
    },

    /** Whether the job's Volcano Job is still on the cluster (a deletion waits for its pods). */
    async volcanoJobExists(jobId: string, namespace: string | undefined): Promise<boolean> {
      const left = await listLabelled(VOLCANO_JOB, `${JOB_ID_LABEL}=${jobId}`, namespace);
      return left.items.length > 0;
    },
  };
}

export type JobObjects = ReturnType<typeof jobObjects>;

function describe(object: KubernetesObject): string {
  const where = object.metadata.namespace ? `${object.metadata.namespace}/` : '';
  return `${object.kind} ${where}${object.metadata.name}`;
}

/** Just enough of an object to address it. */
function ref(kind: Kind, item: { metadata?: { name?: string; namespace?: string } }): KubernetesObject {
  return {
    apiVersion: kind.apiVersion,
    kind: kind.kind,
    metadata: {
      name: item.metadata?.name ?? '',
      ...(item.metadata?.namespace ? { namespace: item.metadata.namespace } : {}),
    },
  };
}
