import type { Duplex } from 'node:stream';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Backend, BackendEvent, LogChunk } from '../../jobs/backend.ts';
import type { ResolvedPipelineConfig } from '../../model/config.ts';
import type { JobBuild } from '../../plugins/plugin.ts';
import type { JobStorage } from '../../storage/job-storage.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL } from '../../volcano/labels.ts';
import { logFileName, SSH_PORT, sshServiceName } from '../../volcano/names.ts';
import type { KubernetesObject, Service, VolcanoJob } from '../../volcano/types.ts';
import { apiMessage, type Connection, connect, statusCode } from './connection.ts';
import { type Follower, follow } from './follow.ts';
import { machinesOf, type NodeSummary, summarizeNode } from './nodes.ts';
import { addPeerAliases, openPeerPolicies, type PeerPod } from './peers.ts';
import { type KubernetesSettings, resolveKubernetesSettings } from './settings.ts';
import {
  FINAL_PHASES,
  type JobSummary,
  type PodGroupSummary,
  type PodSummary,
  reportOf,
  summarizeJob,
  summarizePod,
  summarizePodGroup,
} from './states.ts';
import { connectToPod, podLog, podLogText, podShell } from './streams.ts';

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

/** The kinds a job's own companions can be; namespaces and queues are shared by an owner's jobs. */
export const JOB_COMPANION_KINDS = [
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'v1', kind: 'Secret' },
  { apiVersion: 'v1', kind: 'ConfigMap' },
] as const;

/** The order companions are created in: what others refer to first, so nothing waits on a gap. */
const CREATE_ORDER = ['Namespace', 'Queue', 'NetworkPolicy', 'ConfigMap', 'Secret', 'Service'];

const VOLCANO_JOB = { apiVersion: 'batch.volcano.sh/v1alpha1', kind: 'Job' } as const;
const POD_GROUP = { apiVersion: 'scheduling.volcano.sh/v1beta1', kind: 'PodGroup' } as const;
const OURS = `${MANAGED_BY_LABEL}=${MANAGED_BY},${JOB_ID_LABEL}`;

const LIST_PAGE = 500;
/** How long suspend waits for a deleted Volcano Job to be gone (its pods' grace period). */
const SUSPEND_WAIT_ATTEMPTS = 120;
const SUSPEND_WAIT_MS = 500;

/** Orphans younger than this may belong to a submission of another ucompute process still under way. */
const ORPHAN_MIN_AGE_MS = 10 * 60_000;

interface JobView {
  job?: JobSummary;
  pods: Map<number, PodSummary>;
  group?: PodGroupSummary;
  reported?: { state: BackendEvent['state']; status: string };
  /** Ended (reported and being removed) or cancelled: nothing more is reported. */
  done: boolean;
  /** Resolved when the job's final report went out (followers of its logs stop then). */
  waiters: Set<() => void>;
}

/**
 * Runs jobs on a Kubernetes cluster with the Volcano scheduler: submits each job's Volcano Job
 * after its companions, follows Volcano Jobs, PodGroups and pods with one watch each, turns what
 * it sees into job states, saves the logs and removes the job's objects when it ends.
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
  const { objects } = conn;
  const now = options.now ?? Date.now;
  const log = options.log;
  const single = placement.namespaceStrategy === 'single';
  const scope = single ? placement.namespace : undefined;
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
      view = { pods: new Map(), done: false, waiters: new Set() };
      views.set(jobId, view);
    }
    return view;
  };

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
    if (!view?.job || view.done) return;
    const report = reportOf(view.job, view.pods.values(), view.group, view.reported?.state);
    if (FINAL_PHASES.has(view.job.phase)) {
      view.done = true;
      void finish(jobId, view, report);
      return;
    }
    if (view.reported?.state === report.state && view.reported.status === report.status) return;
    view.reported = { state: report.state, status: report.status };
    emit({ jobId, ...report, at: now() });
  }

  function emit(event: BackendEvent): void {
    for (const l of listeners) l(event);
  }

  /** Saves the logs, reports the end, then removes the job's objects. */
  async function finish(
    jobId: string,
    view: JobView,
    report: Omit<BackendEvent, 'jobId' | 'at'>,
  ): Promise<void> {
    const job = view.job!;
    await saveLogs(job, view);
    emit({ jobId, ...report, at: now() });
    for (const w of view.waiters) w();
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

  /** One kind's objects carrying the label `selector`, in `namespace` (default: ours), all at once. */
  const listLabelled = (kind: { apiVersion: string; kind: string }, selector: string, namespace = scope) =>
    objects.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, selector);

  const watch = new Watch(conn.kubeConfig);
  const collection = (apiVersion: string, plural: string) =>
    `/${apiVersion.includes('/') ? 'apis' : 'api'}/${apiVersion}${scope ? `/namespaces/${scope}` : ''}/${plural}`;
  /**
   * Lists in pages, so that 10,000 jobs never sit in memory as one response: our objects in our
   * scope, or with `everything` every object of a cluster-scoped kind.
   */
  const lister =
    (apiVersion: string, kind: string, everything = false) =>
    async (page: (items: unknown[]) => void) => {
      let continueToken: string | undefined;
      let resourceVersion = '';
      do {
        const list = await objects.list(
          apiVersion,
          kind,
          everything ? undefined : scope,
          undefined,
          undefined,
          undefined,
          undefined,
          everything ? undefined : OURS,
          LIST_PAGE,
          continueToken,
        );
        page(list.items);
        resourceVersion ||= list.metadata?.resourceVersion ?? '';
        continueToken =
          list.metadata?._continue ?? (list.metadata as { continue?: string } | undefined)?.continue;
      } while (continueToken);
      return resourceVersion;
    };
  const failed = (what: string) => (error: unknown) =>
    log?.warn({ err: error }, `following ${what} failed (${apiMessage(error)}); listing again shortly`);

  let followers: Follower<unknown>[] = [];
  let nodes: Follower<NodeSummary> | undefined;
  let started: Promise<void> | undefined;
  /** Starts the watches on first use, once a listener can hear what the first list reports. */
  function start(): Promise<void> {
    started ??= (async () => {
      const jobs = follow<JobSummary>({
        what: 'Volcano Jobs',
        watch,
        path: collection(VOLCANO_JOB.apiVersion, 'jobs'),
        labelSelector: OURS,
        list: lister(VOLCANO_JOB.apiVersion, VOLCANO_JOB.kind),
        summarize: summarizeJob,
        changed: (_key, job) => {
          viewOf(job.jobId).job = job;
          touch(job.jobId);
        },
        deleted: (_key, job) => jobDeleted(job),
        failed: failed('Volcano Jobs'),
      });
      const pods = follow<PodSummary>({
        what: 'pods',
        watch,
        path: collection('v1', 'pods'),
        labelSelector: OURS,
        list: lister('v1', 'Pod'),
        summarize: summarizePod,
        // Pods may be seen before their job (another watch): they are kept by job id either way.
        changed: (_key, pod) => {
          const view = viewOf(pod.jobId);
          view.pods.set(pod.rank, pod);
          for (const w of view.waiters) w();
          touch(pod.jobId);
        },
        deleted: (_key, pod) => {
          const view = views.get(pod.jobId);
          if (!view) return;
          if (!view.job) {
            view.pods.delete(pod.rank);
            if (view.pods.size === 0 && view.group === undefined) views.delete(pod.jobId);
            return;
          }
          const running = !view.done && !FINAL_PHASES.has(view.job.phase);
          if (running && !pod.killedByController && !pod.ended) {
            view.pods.set(pod.rank, { ...pod, deletedUnexpectedly: true });
            touch(pod.jobId);
          }
        },
        failed: failed('pods'),
      });
      const groups = follow<PodGroupSummary>({
        what: 'PodGroups',
        watch,
        path: collection(POD_GROUP.apiVersion, 'podgroups'),
        labelSelector: OURS,
        list: lister(POD_GROUP.apiVersion, POD_GROUP.kind),
        summarize: summarizePodGroup,
        changed: (_key, group) => {
          viewOf(group.jobId).group = group;
          touch(group.jobId);
        },
        deleted: () => {},
        failed: failed('PodGroups'),
      });
      // The machines (utilization, refusing jobs that fit no node): submissions never wait for it.
      nodes = follow<NodeSummary>({
        what: 'nodes',
        watch,
        path: '/api/v1/nodes',
        labelSelector: '',
        list: lister('v1', 'Node', true),
        summarize: summarizeNode,
        changed: () => {},
        deleted: () => {},
        failed: failed('nodes'),
      });
      followers = [jobs, pods, groups, nodes] as Follower<unknown>[];
      // Jobs first: pods and groups are kept only for jobs known (or being submitted).
      await jobs.ready;
      await Promise.all([pods.ready, groups.ready]);
      listed = true;
      evaluateDirty();
      reconcileTimer = setInterval(() => {
        reconcile().catch((e: unknown) => log?.warn({ err: e }, `reconciliation failed: ${apiMessage(e)}`));
      }, settings.reconcileIntervalMs);
      reconcileTimer.unref();
    })();
    return started;
  }
  let reconcileTimer: NodeJS.Timeout | undefined;

  /** A Volcano Job vanished: removed by us (ended, cancelled) or by someone else, which loses the job. */
  function jobDeleted(job: JobSummary): void {
    const view = views.get(job.jobId);
    views.delete(job.jobId);
    if (suspended.delete(job.jobId)) return;
    if (!view || view.done || inFlight.has(job.jobId)) return;
    view.done = true;
    emit({
      jobId: job.jobId,
      state: 'FAILURE',
      status: `ucompute lost track of this job: its Volcano Job ${job.namespace}/${job.name} was deleted outside ucompute`,
      at: now(),
    });
    for (const w of view.waiters) w();
    void removeJob(job.jobId, job.namespace).catch(() => {});
  }

  // ---- writing ------------------------------------------------------------------------------

  async function createIfAbsent(object: KubernetesObject): Promise<void> {
    try {
      await objects.create(object);
    } catch (e) {
      if (statusCode(e) === 409) return; // it exists: a repeat after a crash, or a shared object
      const where = object.metadata.namespace ? `${object.metadata.namespace}/` : '';
      throw new Error(`could not create ${object.kind} ${where}${object.metadata.name}: ${apiMessage(e)}`);
    }
  }

  async function deleteIfPresent(object: KubernetesObject, graceSeconds?: number): Promise<void> {
    try {
      await objects.delete(object, undefined, undefined, graceSeconds, undefined, 'Background');
    } catch (e) {
      if (statusCode(e) !== 404) throw e;
    }
  }

  /** Deletes the job's Volcano Job (its pods go with it) and its own companions; 404s are fine. */
  async function removeJob(jobId: string, namespace?: string): Promise<void> {
    const selector = `${JOB_ID_LABEL}=${jobId}`;
    const found = await listLabelled(VOLCANO_JOB, selector, namespace);
    for (const job of found.items)
      await deleteIfPresent(ref(VOLCANO_JOB, job), settings.deleteGracePeriodSeconds);
    for (const kind of JOB_COMPANION_KINDS) {
      const list = await listLabelled(kind, selector);
      for (const item of list.items) await deleteIfPresent(ref(kind, item));
    }
  }

  async function reconcile(): Promise<number> {
    await start();
    let deleted = 0;
    const live = (jobId: string) => inFlight.has(jobId) || views.get(jobId)?.job !== undefined;
    for (const kind of JOB_COMPANION_KINDS) {
      const list = await listLabelled(kind, OURS);
      for (const item of list.items) {
        const jobId = item.metadata?.labels?.[JOB_ID_LABEL];
        if (typeof jobId !== 'string' || live(jobId)) continue;
        const created = new Date(item.metadata?.creationTimestamp ?? 0).getTime();
        if (now() - created < ORPHAN_MIN_AGE_MS) continue;
        await deleteIfPresent(ref(kind, item));
        deleted++;
      }
    }
    if (deleted > 0) log?.info({ deleted }, 'deleted objects of jobs that no longer exist');
    return deleted;
  }

  /**
   * A rank's pod once its container runs. The job's phase and its pods come on different
   * watches, so a job just seen running may wait a moment (bounded) for its pods' news.
   */
  async function runningPod(jobId: string, rank: number): Promise<PodSummary> {
    await start();
    const deadline = performance.now() + conn.requestTimeoutMs;
    for (;;) {
      const view = views.get(jobId);
      const pod = view?.pods.get(rank);
      if (pod?.started && !pod.ended) return pod;
      const left = deadline - performance.now();
      const starting = view?.job?.phase === 'Running' && !view.done && !pod?.ended;
      if (!starting || left <= 0) throw new Error(`rank ${rank} of job ${jobId} is not running`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        view.waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /**
   * Closes a stream to a rank once the rank or its job has ended, so that nothing the proxy keeps
   * (a pooled port-forward, a relay) outlives the pod it reached.
   */
  function closedWithPod<S extends Duplex>(jobId: string, rank: number, stream: S): S {
    const view = views.get(jobId);
    if (!view) return stream;
    const check = () => {
      const pod = view.pods.get(rank);
      if (view.done || !pod || pod.ended) stream.destroy();
    };
    view.waiters.add(check);
    stream.once('close', () => view.waiters.delete(check));
    return stream;
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
      const companions = [...build.companions].sort(
        (a, b) => CREATE_ORDER.indexOf(a.kind) - CREATE_ORDER.indexOf(b.kind),
      );
      try {
        for (const companion of companions) {
          const shared = companion.kind === 'Namespace' || companion.kind === 'Queue';
          const key = `${companion.kind}/${companion.metadata.name}`;
          if (shared && seenShared.has(key)) continue;
          await createIfAbsent(companion);
          if (shared) seenShared.add(key);
        }
        const volcanoJob: VolcanoJob = addPeerAliases(build.volcanoJob, podsOf);
        await createIfAbsent(volcanoJob);
        viewOf(jobId);
        await openPeerPolicies(objects, jobId, volcanoJob, podsOf);
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
      if (view) {
        view.done = true;
        for (const w of view.waiters) w();
        if (view.job) await saveLogs(view.job, view);
      }
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
      if (view) {
        view.done = true;
        for (const w of view.waiters) w();
        if (view.job) await saveLogs(view.job, view);
      }
      suspended.add(jobId);
      try {
        await removeJob(jobId, namespace);
        for (let i = 0; i < SUSPEND_WAIT_ATTEMPTS; i++) {
          const left = await listLabelled(VOLCANO_JOB, `${JOB_ID_LABEL}=${jobId}`, namespace);
          if (left.items.length === 0) break;
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

    machines() {
      // Unknown until the nodes are listed (or when they cannot be): nothing is refused then.
      return machinesOf(nodes?.items.values() ?? []);
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
      return podShell(conn, await runningPod(jobId, rank), size);
    },

    async connect(jobId, rank, port) {
      return closedWithPod(jobId, rank, await connectToPod(conn, await runningPod(jobId, rank), port));
    },

    /** The node port the API server gave the job's Service `j-<id>-ssh`, on `kubernetes.sshHost`. */
    async sshEndpoint(jobId) {
      await start();
      const namespace = views.get(jobId)?.job?.namespace ?? scope ?? placement.namespace;
      const name = sshServiceName(jobId);
      const service = (await objects.read({
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
      for (const f of followers) f.stop();
      for (const view of views.values()) {
        for (const w of view.waiters) w();
        view.waiters.clear();
      }
    },
  };
}

/** Just enough of an object to address it. */
function ref(
  kind: { apiVersion: string; kind: string },
  item: { metadata?: { name?: string; namespace?: string } },
) {
  return {
    apiVersion: kind.apiVersion,
    kind: kind.kind,
    metadata: {
      name: item.metadata?.name ?? '',
      ...(item.metadata?.namespace ? { namespace: item.metadata.namespace } : {}),
    },
  };
}
