import type { Logger } from 'pino';
import type { Backend, BackendEvent, LogChunk } from '../../jobs/backend.ts';
import type { ResolvedPipelineConfig } from '../../model/config.ts';
import type { JobBuild } from '../../plugins/plugin.ts';
import type { JobStorage } from '../../storage/job-storage.ts';
import type { Service, VolcanoJob } from '../../volcano/api/types.ts';
import { logFileName, SSH_PORT, sshServiceName } from '../../volcano/names.ts';
import { apiMessage, type Connection, connect } from './connection.ts';
import {
  companionsToCreate,
  evaluation,
  isShared,
  jobDeletion,
  keptPod,
  podDeletion,
  sharedKey,
} from './decisions.ts';
import { jobObjects } from './job-objects.ts';
import { closedWithPod, type JobView, newJobView, runningPod, wake } from './job-views.ts';
import { clusterUsage } from './metrics.ts';
import { machinesOf } from './nodes.ts';
import { addPeerAliases, openPeerPolicies, type PeerPod } from './peers.ts';
import { type KubernetesSettings, resolveKubernetesSettings } from './settings.ts';
import { type JobSummary, type PodSummary, type Report, reportOf } from './states.ts';
import { connectToPod, podLog, podLogText, podShell } from './streams.ts';
import { type Watches, watchCluster } from './watches.ts';

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
 * after its companions, follows Volcano Jobs, PodGroups and pods with one watch each, turns what
 * it sees into job states (decisions.ts, states.ts), saves the logs and removes the job's objects
 * when it ends.
 */
export function kubernetesBackend(options: KubernetesBackendOptions): Backend & {
  /** Which cluster, context and namespaces it uses, for the start-up message. */
  readonly description: string;
  /** Deletes objects of ours whose job is gone; also runs periodically. */
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
  const listeners: ((e: BackendEvent) => void)[] = [];
  const views = new Map<string, JobView>();
  /** Suspended jobs whose Volcano Job's deletion is still to be seen: not a lost job. */
  const suspended = new Set<string>();
  const inFlight = new Set<string>();
  const seenShared = new Set<string>();
  let closed = false;

  const viewOf = (jobId: string): JobView => {
    let view = views.get(jobId);
    if (!view) {
      view = newJobView();
      views.set(jobId, view);
    }
    return view;
  };
  const removeJob = (jobId: string, namespace?: string) =>
    cluster.removeJob(jobId, namespace, settings.deleteGracePeriodSeconds);

  // ---- following ----------------------------------------------------------------------------

  const dirty = new Set<string>();
  // Until every kind is listed, a job's state would be judged on part of what is known.
  let listed = false;
  const touch = (jobId: string) => {
    if (dirty.size === 0 && listed) setImmediate(evaluateDirty);
    dirty.add(jobId);
  };

  function evaluateDirty(): void {
    const ids = [...dirty];
    dirty.clear();
    for (const id of ids) evaluate(id);
  }

  function evaluate(jobId: string): void {
    const view = views.get(jobId);
    if (!view?.job) return;
    const report = reportOf(view.job, view.pods.values(), view.group, view.reported?.state);
    const next = evaluation({ phase: view.job.phase, done: view.done, reported: view.reported }, report);
    if (next.action === 'finish') {
      view.done = true;
      void finish(jobId, view, next.report);
    } else if (next.action === 'report') {
      view.reported = { state: report.state, status: report.status };
      emit({ jobId, ...report, at: now() });
    }
  }

  function emit(event: BackendEvent): void {
    for (const l of listeners) l(event);
  }

  /** Saves the logs, reports the end, then removes the job's objects. */
  async function finish(jobId: string, view: JobView, report: Report): Promise<void> {
    const job = view.job!;
    await saveLogs(job, view);
    emit({ jobId, ...report, at: now() });
    wake(view);
    view.waiters.clear();
    await removeJob(jobId, job.namespace).catch((e: unknown) =>
      log?.warn({ err: e, jobId }, 'could not remove the objects of an ended job; reconciliation will'),
    );
  }

  async function saveLogs(job: JobSummary, view: JobView): Promise<void> {
    const storage = options.storage;
    if (!storage || job.outputFolder === undefined) return;
    for (const pod of [...view.pods.values()].sort((a, b) => a.rank - b.rank)) {
      if (!pod.started) continue;
      try {
        const text = await podLogText(conn, pod);
        await storage.writeFile(`${job.outputFolder}/${logFileName(pod.rank)}`, text);
      } catch (e) {
        log?.warn({ err: e, jobId: job.jobId, rank: pod.rank }, 'could not save the log of a rank');
      }
    }
  }

  /** A Volcano Job vanished: removed by us (ended, cancelled) or by someone else, which loses the job. */
  function jobDeleted(job: JobSummary): void {
    const view = views.get(job.jobId);
    views.delete(job.jobId);
    const decision = jobDeletion({
      known: view !== undefined,
      done: view?.done ?? false,
      suspended: suspended.delete(job.jobId),
      submitting: inFlight.has(job.jobId),
    });
    if (decision !== 'lost' || !view) return;
    view.done = true;
    emit({
      jobId: job.jobId,
      state: 'FAILURE',
      status: `ucompute lost track of this job: its Volcano Job ${job.namespace}/${job.name} was deleted outside ucompute`,
      at: now(),
    });
    wake(view);
    void removeJob(job.jobId, job.namespace).catch(() => {});
  }

  function podDeleted(pod: PodSummary): void {
    const view = views.get(pod.jobId);
    if (!view) return;
    const facts = { phase: view.job?.phase, done: view.done };
    const kept = keptPod(facts, view.pods.get(pod.rank), pod, true, performance.now());
    if (podDeletion(facts, pod) === 'forget') {
      view.pods.delete(pod.rank);
      if (view.pods.size === 0 && view.group === undefined) views.delete(pod.jobId);
    } else if (kept.deletedUnexpectedly) {
      view.pods.set(pod.rank, kept);
      touch(pod.jobId);
    }
  }

  let watches: Watches | undefined;
  let started: Promise<void> | undefined;
  let reconcileTimer: NodeJS.Timeout | undefined;
  /** Starts the watches on first use, once a listener can hear what the first list reports. */
  function start(): Promise<void> {
    started ??= (async () => {
      watches = watchCluster(conn, scope, {
        jobChanged: (job) => {
          viewOf(job.jobId).job = job;
          touch(job.jobId);
        },
        jobDeleted,
        // Pods may be seen before their job (another watch): they are kept by job id either way.
        podChanged: (pod) => {
          const view = viewOf(pod.jobId);
          const facts = { phase: view.job?.phase, done: view.done };
          view.pods.set(pod.rank, keptPod(facts, view.pods.get(pod.rank), pod, false, performance.now()));
          wake(view);
          touch(pod.jobId);
        },
        podDeleted,
        groupChanged: (group) => {
          viewOf(group.jobId).group = group;
          touch(group.jobId);
        },
        failed: (what, error) =>
          log?.warn({ err: error }, `following ${what} failed (${apiMessage(error)}); listing again shortly`),
      });
      await watches.listed;
      listed = true;
      evaluateDirty();
      reconcileTimer = setInterval(() => {
        reconcile().catch((e: unknown) => log?.warn({ err: e }, `reconciliation failed: ${apiMessage(e)}`));
      }, settings.reconcileIntervalMs);
      reconcileTimer.unref();
    })();
    return started;
  }

  async function reconcile(): Promise<number> {
    await start();
    // A job submitted here is live before its watch shows it: under load that took over 10 min
    // (the cluster benchmark lost 300 of 1,000 running jobs' NetworkPolicies to this).
    const live = (jobId: string) => inFlight.has(jobId) || views.has(jobId);
    const deleted = await cluster.deleteOrphans(live, now());
    if (deleted > 0) log?.info({ deleted }, 'deleted objects of jobs that no longer exist');
    return deleted;
  }

  /** Creates the job's companions, then its Volcano Job once the owner's queue takes jobs. */
  async function create(jobId: string, build: JobBuild): Promise<void> {
    for (const companion of companionsToCreate(build.companions, seenShared)) {
      await cluster.createIfAbsent(companion);
      if (companion.kind === 'Queue') await cluster.waitUntilOpen(companion);
      if (isShared(companion.kind)) seenShared.add(sharedKey(companion));
    }
    const volcanoJob: VolcanoJob = addPeerAliases(build.volcanoJob, podsOf);
    await cluster.createIfAbsent(volcanoJob);
    viewOf(jobId);
    await openPeerPolicies(conn.objects, jobId, volcanoJob, podsOf);
  }

  /** Marks a job done (nothing more is reported) and saves its logs before its objects go. */
  async function stopFollowing(view: JobView | undefined): Promise<void> {
    if (!view) return;
    view.done = true;
    wake(view);
    if (view.job) await saveLogs(view.job, view);
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
        // Nothing of a refused job may stay behind: a retry creates it all again.
        await removeJob(jobId, build.volcanoJob.metadata.namespace).catch((err: unknown) =>
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
        await removeJob(jobId, view?.job?.namespace);
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
        await removeJob(jobId, namespace);
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

    async usage(jobIds) {
      const running = new Map<string, PodSummary[]>();
      for (const id of jobIds) {
        const pods = [...(views.get(id)?.pods.values() ?? [])].filter((p) => p.phase === 'Running');
        if (pods.length > 0) running.set(id, pods);
      }
      return running.size === 0 ? new Map() : measure(running);
    },

    machines() {
      // Unknown until the nodes are listed (or when they cannot be): nothing is refused then.
      return machinesOf(watches?.nodes.items.values() ?? []);
    },

    async knownJobs() {
      await start();
      return new Set([...views].filter(([, v]) => v.job !== undefined).map(([id]) => id));
    },

    onEvent(listener) {
      listeners.push(listener);
    },

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

    reconcile,

    async close() {
      closed = true;
      clearInterval(reconcileTimer);
      watches?.stop();
      for (const view of views.values()) {
        wake(view);
        view.waiters.clear();
      }
    },
  };
}
