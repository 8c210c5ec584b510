import type { Logger } from 'pino';
import type { Backend, BackendEventListener, LogChunk } from '../../jobs/backend.ts';
import type { ResolvedPipelineConfig } from '../../model/config.ts';
import type { JobBuild } from '../../plugins/plugin.ts';
import type { JobStorage } from '../../storage/job-storage.ts';
import type { Service, VolcanoJob } from '../../volcano/api/types.ts';
import { SSH_PORT, sshServiceName } from '../../volcano/names.ts';
import { apiMessage, type Connection, connect } from './connection.ts';
import { companionsToCreate, isShared, sharedKey } from './decisions.ts';
import { followJobs } from './job-following.ts';
import { jobObjects } from './job-objects.ts';
import { closedWithPod, runningPod } from './job-views.ts';
import { clusterUsage } from './metrics.ts';
import { addPeerAliases, openPeerPolicies, type PeerPod } from './peers.ts';
import { type KubernetesSettings, resolveKubernetesSettings } from './settings.ts';
import { connectToPod, podLog, podLogText, podShell } from './streams.ts';

export { JOB_COMPANION_KINDS } from './job-objects.ts';

export interface KubernetesBackendOptions {
  config: ResolvedPipelineConfig;
  /** The backend's own settings (connection, request rates, clean-up); defaults when left out. */
  settings?: KubernetesSettings;
  /** Made from `settings` when not given. */
  connection?: Connection;
  /** Where each rank's log is saved at the end (the job's output folder); none: not saved. */
  storage?: JobStorage;
  log?: Logger;
  now?: () => number;
}

/** How long suspend waits for a deleted Volcano Job to be gone (its pods' grace period). */
const SUSPEND_WAIT_ATTEMPTS = 120;
const SUSPEND_WAIT_MS = 500;

/**
 * Runs jobs on a Kubernetes cluster with the Volcano scheduler: submits each job's Volcano Job
 * after its companions, cancels and suspends by deleting them, and reaches its pods (logs,
 * shells, ports). Following the cluster — watches turned into job states, the end of a job —
 * is job-following.ts's.
 */
export function kubernetesBackend(options: KubernetesBackendOptions): Backend & {
  /** Which cluster, context and namespaces it uses, for the start-up message. */
  readonly description: string;
  /** Deletes objects of ours whose job is gone, and looks again at jobs waiting for their pods; also runs periodically. */
  reconcile(): Promise<number>;
} {
  const placement = options.config.kubernetes;
  const settings = resolveKubernetesSettings(options.settings);
  const conn = options.connection ?? connect(settings);
  const now = options.now ?? Date.now;
  const log = options.log;
  const measure = clusterUsage(conn, log);
  const single = placement.namespaceStrategy === 'single';
  const scope = single ? placement.namespace : undefined;
  const cluster = jobObjects(conn, scope);
  const listeners: BackendEventListener[] = [];
  /**
   * The creation of each shared companion (namespace, queue, isolation policy), once per process:
   * concurrent first submissions await the same one instead of each sending its create (and
   * all but one getting 409). A failed one is forgotten, so the next submission tries again.
   */
  const sharedCreations = new Map<string, Promise<void>>();
  let closed = false;
  /** Removes a job's objects; `byLeader`: a removal only the leader decides (fenced, job-objects.ts). */
  const removeJob = (jobId: string, namespace: string | undefined, byLeader: boolean) =>
    cluster.removeJob(jobId, namespace, settings.deleteGracePeriodSeconds, byLeader);
  const following = followJobs({
    conn,
    scope,
    cluster,
    removeJob: (jobId, namespace) => removeJob(jobId, namespace, true),
    reconcileIntervalMs: settings.reconcileIntervalMs,
    storage: options.storage,
    log,
    now,
    async emit(event) {
      const written = await Promise.all(listeners.map((l) => l(event)));
      return written.every((w) => w !== false);
    },
  });
  const { views, suspended, inFlight, start, stopFollowing } = following;
  // Asked again as each create goes out: a create decided while leading may wait (the rate
  // limiter, a connection, a pause of the process) until another replica leads.
  conn.writeOnlyWhile(following.leading);

  /** A replica deposed meanwhile creates nothing more: the new leader submits the job. */
  const mayCreate = () => {
    if (!following.leading()) throw new Error('this replica no longer leads: the leader submits the job');
  };

  /** Creates the job's companions, then its Volcano Job once the owner's queue takes jobs. */
  async function create(jobId: string, build: JobBuild): Promise<void> {
    for (const companion of companionsToCreate(build.companions)) {
      mayCreate();
      if (!isShared(companion)) {
        await cluster.createIfAbsent(companion);
        continue;
      }
      const key = sharedKey(companion);
      let creation = sharedCreations.get(key);
      if (!creation) {
        creation = (async () => {
          await cluster.createIfAbsent(companion);
          if (companion.kind === 'Queue') await cluster.waitUntilOpen(companion);
        })();
        sharedCreations.set(key, creation);
        creation.catch(() => sharedCreations.delete(key));
      }
      await creation;
    }
    const volcanoJob: VolcanoJob = addPeerAliases(build.volcanoJob, podsOf);
    mayCreate();
    await cluster.createIfAbsent(volcanoJob);
    following.viewOf(jobId);
    await openPeerPolicies(conn.objects, jobId, volcanoJob, podsOf);
  }

  const podsOf = (jobId: string): PeerPod | undefined => {
    const view = views.get(jobId);
    const pod = view?.pods.get(0);
    return view?.job ? { namespace: view.job.namespace, ip: pod?.ip ?? '' } : undefined;
  };

  return {
    name: 'kubernetes',
    description:
      `cluster ${conn.server} (context ${conn.context}), ` +
      (single
        ? `namespace ${placement.namespace}, queue ${placement.queue}`
        : `one namespace and queue per owner (${options.config.prefix}-u-<user>, ${options.config.prefix}-p-<project>)`),

    async submit(jobId, build: JobBuild) {
      if (closed) throw new Error('the kubernetes backend is closed');
      await start();
      if (views.get(jobId)?.job) return; // already there: a repeated submit
      inFlight.add(jobId);
      try {
        await create(jobId, build);
      } catch (e) {
        // Nothing of a refused job may stay behind: a retry creates it all again. A deposed replica
        // leaves it all to the new leader, which may have created the job already.
        if (following.leading())
          await removeJob(jobId, build.volcanoJob.metadata.namespace, true).catch((err: unknown) =>
            log?.warn(
              { err, jobId },
              'could not remove what a refused submission created; reconciliation will',
            ),
          );
        views.delete(jobId);
        throw e;
      } finally {
        inFlight.delete(jobId);
      }
    },

    async cancel(jobId) {
      await start();
      const view = views.get(jobId);
      await stopFollowing(view);
      try {
        await removeJob(jobId, view?.job?.namespace, false);
      } catch (e) {
        throw new Error(`could not cancel job ${jobId} on the cluster: ${apiMessage(e)}`);
      }
    },

    /**
     * Delete and recreate (Volcano's AbortJob would keep the PodGroup and the job's queue place):
     * the job's logs are saved and its objects removed; its folder is on the shared storage and
     * stays. The next submit creates the same Volcano Job again, so this waits until it is gone.
     */
    async suspend(jobId) {
      await start();
      const view = views.get(jobId);
      const namespace = view?.job?.namespace;
      await stopFollowing(view);
      suspended.add(jobId);
      try {
        await removeJob(jobId, namespace, false);
        for (let i = 0; i < SUSPEND_WAIT_ATTEMPTS; i++) {
          if (!(await cluster.volcanoJobExists(jobId, namespace))) break;
          await new Promise((resolve) => setTimeout(resolve, SUSPEND_WAIT_MS));
        }
      } catch (e) {
        throw new Error(`could not suspend job ${jobId} on the cluster: ${apiMessage(e)}`);
      }
      views.delete(jobId);
    },

    async extend() {
      // ucompute's monitor enforces deadlines (Expiry); the Volcano Job carries none to move.
    },

    usage(jobIds) {
      return measure(jobIds, (id) => views.get(id)?.pods);
    },

    machines() {
      // Unknown until the nodes are listed (or when they cannot be): nothing is refused then.
      return following.machines();
    },

    async knownJobs() {
      await start();
      return new Set([...views].filter(([, v]) => v.job !== undefined).map(([id]) => id));
    },

    onEvent(listener) {
      listeners.push(listener);
    },

    setLeading: following.setLeading,
    caughtUp: following.caughtUp,

    async *logs(jobId, { follow: following, signal }): AsyncIterable<LogChunk> {
      await start();
      const view = views.get(jobId);
      if (!view?.job) return;
      if (!following) {
        for (const pod of [...view.pods.values()].sort((a, b) => a.rank - b.rank)) {
          if (pod.started) yield { rank: pod.rank, stdout: await podLogText(conn, pod) };
        }
        return;
      }
      yield* podLog(
        conn,
        {
          pods: () => [...view.pods.values()],
          ended: () => view.done,
          onChange: (callback) => {
            view.waiters.add(callback);
            return () => view.waiters.delete(callback);
          },
        },
        signal,
      );
    },

    async shell(jobId, rank, size) {
      await start();
      return podShell(conn, await runningPod(views, jobId, rank, conn.requestTimeoutMs), size);
    },

    async connect(jobId, rank, port) {
      await start();
      const pod = await runningPod(views, jobId, rank, conn.requestTimeoutMs);
      return closedWithPod(views.get(jobId), rank, await connectToPod(conn, pod, port));
    },

    /** The node port the API server gave the job's Service `j-<id>-ssh`, on `kubernetes.sshHost`. */
    async sshEndpoint(jobId) {
      await start();
      const namespace = views.get(jobId)?.job?.namespace ?? scope ?? placement.namespace;
      const name = sshServiceName(jobId);
      const service = (await conn.objects.read({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace },
      })) as Service;
      const port = service.spec?.ports?.find((p) => p.port === SSH_PORT)?.nodePort;
      if (port === undefined) throw new Error(`the Service ${namespace}/${name} has no node port`);
      return { host: settings.sshHost ?? new URL(conn.server).hostname, port };
    },

    reconcile: following.reconcile,

    async close() {
      closed = true;
      following.close();
    },
  };
}
