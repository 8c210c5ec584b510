import type { BackendEvent } from '../../jobs/backend.ts';
import { isFinalPhase } from '../../volcano/api/phases.ts';
import type { KubernetesObject } from '../../volcano/api/types.ts';
import { JOB_ID_LABEL } from '../../volcano/labels.ts';
import type { PodSummary, Report } from './states.ts';

/**
 * What the Kubernetes backend does about what it observes, as pure functions of plain data:
 * the watches and the API calls live elsewhere (job-following.ts, kubernetes-backend.ts), so
 * every decision is tested over its whole table (test/kubernetes-decisions.test.ts).
 */

/** What ucompute knows of one job on the cluster, as far as its decisions go. */
export interface JobFacts {
  /** The Volcano Job's phase, when the job is known; undefined before it is seen. */
  phase?: string;
  /** Ended (reported and being removed), cancelled or suspended: nothing more is reported. */
  done: boolean;
  /** What was last reported. */
  reported?: { state: BackendEvent['state']; status: string };
}

export type Evaluation =
  /** The job ended: save its logs, report the end, remove its objects. */
  | { action: 'finish'; report: Report }
  /** Its state or status changed: report it. */
  | { action: 'report'; report: Report }
  | { action: 'nothing' };

/** After a change to a job, its pods or its PodGroup: what to report, given the mapped report. */
export function evaluation(job: JobFacts, report: Report): Evaluation {
  if (job.phase === undefined || job.done) return { action: 'nothing' };
  if (isFinalPhase(job.phase)) return { action: 'finish', report };
  const last = job.reported;
  if (last?.state === report.state && last.status === report.status) return { action: 'nothing' };
  return { action: 'report', report };
}

/**
 * Volcano 1.10's job controller creates a job's pods only when its PodGroup informer sees the
 * group's phase change (an update; job_controller.go has no add handler). A PodGroup that became
 * Inqueue while the controller's watch was down (an API-server restart) is first seen by its
 * re-list, as an add: the job then waits with no pods for ever. ucompute cannot create them; it
 * says so on the job once the wait has lasted this long (enqueued pods normally come in seconds).
 */
export const STRANDED_AFTER_MS = 3 * 60_000;
/** How often jobs waiting for their pods are looked at again (nothing on the cluster changes). */
export const STRANDED_CHECK_MS = 30_000;

/** What the stranded-job decision looks at. */
export interface PodWaitFacts {
  /** The Volcano Job's phase. */
  phase: string | undefined;
  /** Its PodGroup's phase. */
  groupPhase: string | undefined;
  pods: number;
  done: boolean;
}

/**
 * Since when (clock ms) the job has waited for pods that Volcano should have created — its
 * PodGroup admitted (Inqueue or Running) and its Job Pending or Running with no pod — or undefined
 * when it does not; `since` is the previous answer.
 */
export function podlessSince(
  facts: PodWaitFacts,
  since: number | undefined,
  now: number,
): number | undefined {
  const admitted = facts.groupPhase === 'Inqueue' || facts.groupPhase === 'Running';
  const live = facts.phase === 'Pending' || facts.phase === 'Running';
  return !facts.done && admitted && live && facts.pods === 0 ? (since ?? now) : undefined;
}

/** The report, with what a researcher (and an administrator) should know once the job is stranded. */
export function strandedReport(
  report: Report,
  groupPhase: string,
  since: number | undefined,
  now: number,
): Report {
  if (since === undefined || now - since < STRANDED_AFTER_MS) return report;
  return {
    ...report,
    status:
      `${report.status}. Volcano has not created its pods: its PodGroup has been ${groupPhase} with no pods ` +
      `since ${new Date(since).toISOString()} (Volcano 1.10 misses this after an API-server restart; ` +
      'restarting volcano-controller-manager makes it create them, or cancel and submit the job again)',
  };
}

export type PodDeletion =
  /** Its job is not known (yet, or any more): drop the pod from what is kept. */
  | 'forget'
  /** Deleted under a running job by someone else than Volcano's controller: the rank is lost. */
  | 'lost'
  /** A deletion that changes nothing: the job ended, Volcano killed it, or it had ended. */
  | 'ignore';

/**
 * The phases in which Volcano's job controller deletes the job's pods itself (a policy's
 * AbortJob, TerminateJob, RestartJob, or the job completing): Volcano v1.10 marks none of them.
 */
const KILLING_PHASES = new Set(['Aborting', 'Terminating', 'Restarting', 'Completing']);

export function podDeletion(
  job: JobFacts,
  pod: Pick<PodSummary, 'killedByController' | 'ended'>,
): PodDeletion {
  if (job.phase === undefined) return 'forget';
  const running = !job.done && !isFinalPhase(job.phase) && !KILLING_PHASES.has(job.phase);
  return running && !pod.killedByController && !pod.ended ? 'lost' : 'ignore';
}

/**
 * The pod to keep after a change, or after its deletion (`gone`): once its deletion begins or
 * ends under a running job, not by Volcano's controller, the rank is lost, stamped with when that
 * was first seen (`seenAt`); a rank once lost stays lost.
 */
export function keptPod(
  job: JobFacts,
  kept: PodSummary | undefined,
  pod: PodSummary,
  gone: boolean,
  seenAt: number,
): PodSummary {
  if (kept?.deletedUnexpectedly)
    return { ...pod, deletedUnexpectedly: true, deletedSeenAt: kept.deletedSeenAt! };
  if ((gone || pod.deleting) && podDeletion(job, pod) === 'lost')
    return { ...pod, deletedUnexpectedly: true, deletedSeenAt: seenAt };
  return pod;
}

export type JobDeletion =
  /** Removed by ucompute (it ended, was cancelled), or still being submitted: nothing to say. */
  | 'ignore'
  /** A suspended job's Volcano Job is gone, as suspend wanted. */
  | 'suspended'
  /** Deleted outside ucompute while the job went on: the job is lost. */
  | 'lost';

export function jobDeletion(facts: {
  known: boolean;
  done: boolean;
  suspended: boolean;
  submitting: boolean;
}): JobDeletion {
  if (facts.suspended) return 'suspended';
  if (!facts.known || facts.done || facts.submitting) return 'ignore';
  return 'lost';
}

/** Orphans younger than this may belong to a submission of another ucompute process still under way. */
export const ORPHAN_MIN_AGE_MS = 10 * 60_000;

/** Whether an object of ours may be deleted: its job is neither live nor being submitted, and it is old enough. */
export function isOrphan(
  object: { jobId: string | undefined; createdAt: number },
  live: (jobId: string) => boolean,
  now: number,
): boolean {
  if (object.jobId === undefined || live(object.jobId)) return false;
  return now - object.createdAt >= ORPHAN_MIN_AGE_MS;
}

/**
 * Whether a companion is shared by the jobs of a namespace (an owner's namespace and queue, the
 * namespace's isolation policy) rather than one job's own: shared ones carry no job id label.
 */
export const isShared = (object: Pick<KubernetesObject, 'metadata'>) =>
  object.metadata.labels?.[JOB_ID_LABEL] === undefined;

/** The order companions are created in: what others refer to first, so nothing waits on a gap. */
const CREATE_ORDER = ['Namespace', 'Queue', 'NetworkPolicy', 'ConfigMap', 'Secret', 'Service'];

/** The companions a submission creates, in order (shared ones the backend creates once). */
export function companionsToCreate<T extends Pick<KubernetesObject, 'kind' | 'metadata'>>(
  companions: readonly T[],
): T[] {
  return [...companions].sort((a, b) => CREATE_ORDER.indexOf(a.kind) - CREATE_ORDER.indexOf(b.kind));
}

export const sharedKey = (object: Pick<KubernetesObject, 'kind' | 'metadata'>) =>
  `${object.kind}/${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`;

/**
 * Whether a Volcano Queue takes jobs. Volcano's admission webhook refuses a Job for a queue
 * whose state is not `Open`, and a new queue has no state until Volcano's queue controller
 * opens it: the first job of a new owner must wait for that.
 */
export const queueIsOpen = (queue: { status?: { state?: unknown } } | undefined) =>
  queue?.status?.state === 'Open';
