import type { Logger } from 'pino';
import type { BackendEvent, Machines } from '../../jobs/backend.ts';
import type { JobStorage } from '../../storage/job-storage.ts';
import { logFileName } from '../../volcano/names.ts';
import { apiMessage, type Connection } from './connection.ts';
import {
  evaluation,
  jobDeletion,
  keptPod,
  podDeletion,
  podlessSince,
  STRANDED_CHECK_MS,
  strandedReport,
} from './decisions.ts';
import type { Follower } from './follow.ts';
import type { JobObjects } from './job-objects.ts';
import { type JobView, newJobView, wake } from './job-views.ts';
import { machinesOf, type NodeSummary } from './nodes.ts';
import type { JobSummary, PodSummary, Report } from './states.ts';
import { endTime, reportOf } from './states.ts';
import { podLogText } from './streams.ts';
import { type Watches, watchCluster } from './watches.ts';

export interface JobFollowingOptions {
  conn: Connection;
  /** The one namespace followed; undefined: every namespace. */
  scope: string | undefined;
  cluster: JobObjects;
  /** Removes a job's objects (with the configured grace period), as the leader: fenced. */
  removeJob(jobId: string, namespace: string | undefined): Promise<void>;
  reconcileIntervalMs: number;
  storage?: JobStorage;
  log?: Logger;
  now: () => number;
  /** Tells the listeners; answers whether the event was written (false: this replica no longer leads). */
  emit(event: BackendEvent): Promise<boolean>;
}

/** What the backend's operations share with the following of the cluster. */
export interface JobFollowing {
  /** Every job known here, by id (the backend adds a job's view when it submits it). */
  readonly views: Map<string, JobView>;
  /** Suspended jobs whose Volcano Job's deletion is still to be seen: not a lost job. */
  readonly suspended: Set<string>;
  /** Jobs being submitted by this process: live before the watch shows them. */
  readonly inFlight: Set<string>;
  viewOf(jobId: string): JobView;
  /** Starts the watches on first use, once a listener can hear what the first list reports. */
  start(): Promise<void>;
  /**
   * Deletes objects of ours whose job is gone, and looks again at jobs waiting for their pods;
   * also runs periodically once started.
   */
  reconcile(): Promise<number>;
  /** Backend.setLeading: a follower reports, ends and deletes nothing; a new leader reports all again. */
  setLeading(leads: (() => boolean) | false): void;
  /** Backend.caughtUp: once listed, what is seen so far is reported and the reports answered. */
  caughtUp(): Promise<void>;
  /** Whether this replica leads now (asked before each act on the cluster). */
  leading(): boolean;
  /** Marks a job done (nothing more is reported) and saves its logs before its objects go. */
  stopFollowing(view: JobView | undefined): Promise<void>;
  /** The cluster's machines from the nodes followed, made again only when a node has changed. */
  machines(): Machines;
  close(): void;
}

/**
 * Follows Volcano Jobs, PodGroups and pods with one watch each and turns what it sees into job
 * events: each change goes through the pure decisions (decisions.ts, states.ts) and only their
 * outcome acts — a report, or the end (logs saved, end reported, objects removed).
 */
export function followJobs(options: JobFollowingOptions): JobFollowing {
  const { conn, cluster, removeJob, log, now, emit } = options;
  const views = new Map<string, JobView>();
  let machinesMade:
    | { of: Follower<NodeSummary> | undefined; changes: number; machines: Machines }
    | undefined;
  const suspended = new Set<string>();
  const inFlight = new Set<string>();

  const viewOf = (jobId: string): JobView => {
    let view = views.get(jobId);
    if (!view) {
      view = newJobView();
      views.set(jobId, view);
    }
    return view;
  };

  let leads: () => boolean = () => true;
  const leading = () => leads();
  const dirty = new Set<string>();
  /** Reports not yet answered (an end's waits for its logs to be saved first). */
  const reporting = new Set<Promise<unknown>>();
  const tracked = (report: Promise<unknown>) => {
    reporting.add(report);
    const done = () => reporting.delete(report);
    report.then(done, done);
  };
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
    if (!view?.job || !leading()) return;
    const facts = {
      phase: view.job.phase,
      groupPhase: view.group?.phase,
      pods: view.pods.size,
      done: view.done,
    };
    view.podlessSince = podlessSince(facts, view.podlessSince, now());
    const mapped = reportOf(view.job, view.pods.values(), view.group, view.reported?.state);
    const report = strandedReport(mapped, view.group?.phase ?? '', view.podlessSince, now());
    const next = evaluation({ phase: view.job.phase, done: view.done, reported: view.reported }, report);
    if (next.action === 'finish') {
      view.done = true;
      void finish(jobId, view, next.report);
    } else if (next.action === 'report') {
      view.reported = { state: report.state, status: report.status };
      tracked(emit({ jobId, ...report, at: now() }));
    }
  }

  /**
   * Saves the logs, reports the end, then removes the job's objects once the end is written: until
   * then they are what tells a new leader (this one killed meanwhile) how the job ended.
   */
  async function finish(jobId: string, view: JobView, report: Report): Promise<void> {
    const job = view.job!;
    const reported = (async () => {
      await saveLogs(job, view);
      return emit({ jobId, ...report, at: endTime(view.pods.values(), now()) });
    })();
    tracked(reported);
    const written = await reported;
    wake(view);
    view.waiters.clear();
    if (!written || !leading()) return;
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
    if (decision !== 'lost' || !view || !leading()) return;
    view.done = true;
    tracked(
      emit({
        jobId: job.jobId,
        state: 'FAILURE',
        status: `ucompute lost track of this job: its Volcano Job ${job.namespace}/${job.name} was deleted outside ucompute`,
        at: now(),
      }),
    );
    wake(view);
    void removeJob(job.jobId, job.namespace).catch(() => {});
  }

  // Pods may be seen before their job (another watch): they are kept by job id either way.
  function podChanged(pod: PodSummary): void {
    const view = viewOf(pod.jobId);
    const facts = { phase: view.job?.phase, done: view.done };
    view.pods.set(pod.rank, keptPod(facts, view.pods.get(pod.rank), pod, false, performance.now()));
    wake(view);
    touch(pod.jobId);
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
  let strandedTimer: NodeJS.Timeout | undefined;
  /** A stranded job changes nothing on the cluster: the clock alone makes it one. */
  const recheckPodless = () => {
    for (const [id, view] of views) if (view.podlessSince !== undefined) touch(id);
  };
  function start(): Promise<void> {
    started ??= (async () => {
      watches = watchCluster(conn, options.scope, {
        jobChanged: (job) => {
          viewOf(job.jobId).job = job;
          touch(job.jobId);
        },
        jobDeleted,
        podChanged,
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
      }, options.reconcileIntervalMs);
      reconcileTimer.unref();
      strandedTimer = setInterval(recheckPodless, STRANDED_CHECK_MS);
      strandedTimer.unref();
    })();
    return started;
  }

  async function reconcile(): Promise<number> {
    await start();
    recheckPodless();
    if (!leading()) return 0;
    // A job submitted here is live before its watch shows it: under load that took over 10 min
    // (the cluster benchmark lost 300 of 1,000 running jobs' NetworkPolicies to this). Asked before
    // each deletion: a replica deposed meanwhile deletes nothing more.
    const live = (jobId: string) => !leading() || inFlight.has(jobId) || views.has(jobId);
    const deleted = await cluster.deleteOrphans(live, now());
    if (deleted > 0) log?.info({ deleted }, 'deleted objects of jobs that no longer exist');
    return deleted;
  }

  return {
    views,
    suspended,
    inFlight,
    viewOf,
    start,
    reconcile,
    setLeading(now) {
      leads = now === false ? () => false : now;
      if (leading()) for (const id of views.keys()) touch(id);
    },
    async caughtUp() {
      await start();
      evaluateDirty();
      await Promise.allSettled(reporting);
    },
    leading,
    async stopFollowing(view) {
      if (!view) return;
      view.done = true;
      wake(view);
      if (view.job) await saveLogs(view.job, view);
    },
    machines() {
      // Asked at every submission: the nodes change seldom, the walk over them would not.
      const nodes = watches?.nodes;
      const changes = nodes?.changes ?? 0;
      if (!machinesMade || machinesMade.of !== nodes || machinesMade.changes !== changes) {
        machinesMade = { of: nodes, changes, machines: machinesOf(nodes?.items.values() ?? []) };
      }
      return machinesMade.machines;
    },
    close() {
      clearInterval(reconcileTimer);
      clearInterval(strandedTimer);
      watches?.stop();
      for (const view of views.values()) {
        wake(view);
        view.waiters.clear();
      }
    },
  };
}
