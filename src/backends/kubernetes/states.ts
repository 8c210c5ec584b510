import type { BackendEvent } from '../../jobs/backend.ts';
import { taskIndexFromPodName, VOLCANO_TASK_INDEX_LABEL } from '../../volcano/emulation/conventions.ts';
import { JOB_ID_LABEL, OUTPUT_FOLDER_ANNOTATION, PEERS_ANNOTATION } from '../../volcano/labels.ts';
import { USER_CONTAINER_NAME } from '../../volcano/names.ts';

/**
 * What ucompute keeps of the objects it follows: a few fields each, not the objects, so that
 * 10,000 jobs stay small in memory. Everything here is plain data read from API objects.
 */

export interface JobSummary {
  jobId: string;
  namespace: string;
  name: string;
  phase: string;
  reason: string;
  message: string;
  running: number;
  minAvailable: number;
  outputFolder?: string;
  /** JSON of `{hostname, jobId}[]`, as ConnectToJob recorded it. */
  peers?: string;
}

export interface ContainerEnd {
  exitCode: number;
  reason: string;
  signal?: number;
  /** When it ended, as its kubelet recorded it (ms since the epoch, whole seconds). */
  finishedAt?: number;
}

export interface PodSummary {
  jobId: string;
  namespace: string;
  name: string;
  rank: number;
  phase: string;
  reason: string;
  message: string;
  ip: string;
  ready: boolean;
  /** Why the scheduler cannot place it, while it waits. */
  unschedulable: string;
  /** The user container's end, once it ended. */
  ended?: ContainerEnd;
  /** Whether the user container has started (logs exist). */
  started: boolean;
  /** Its node is gone or unreachable. */
  lost: boolean;
  evicted: boolean;
  /** Volcano's job controller marked it before deleting it itself (a kill, not a loss). */
  killedByController: boolean;
  /** Its deletion has begun (it has a deletionTimestamp). */
  deleting: boolean;
  /** The pod was deleted by someone else than Volcano's controller while the job went on. */
  deletedUnexpectedly?: boolean;
  /** When that was first seen (monotonic ms): the first rank lost is the one named. */
  deletedSeenAt?: number;
}

export interface PodGroupSummary {
  jobId: string;
  phase: string;
  /** The gang's Unschedulable condition message, e.g. "3/3 tasks in gang unschedulable: …". */
  unschedulable: string;
}

// biome-ignore lint/suspicious/noExplicitAny: API objects arrive as parsed JSON of any shape.
type Raw = any;

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

export function jobIdOf(object: Raw): string | undefined {
  const id = object?.metadata?.labels?.[JOB_ID_LABEL];
  return typeof id === 'string' && id !== '' ? id : undefined;
}

export function summarizeJob(o: Raw): JobSummary | undefined {
  const jobId = jobIdOf(o);
  if (jobId === undefined) return undefined;
  const annotations = o.metadata.annotations ?? {};
  const state = o.status?.state ?? {};
  return {
    jobId,
    namespace: str(o.metadata.namespace),
    name: str(o.metadata.name),
    phase: str(state.phase) || 'Pending',
    reason: str(state.reason),
    message: str(state.message),
    running: num(o.status?.running),
    minAvailable: num(o.status?.minAvailable) || num(o.spec?.minAvailable),
    ...(typeof annotations[OUTPUT_FOLDER_ANNOTATION] === 'string'
      ? { outputFolder: annotations[OUTPUT_FOLDER_ANNOTATION] }
      : {}),
    ...(typeof annotations[PEERS_ANNOTATION] === 'string' ? { peers: annotations[PEERS_ANNOTATION] } : {}),
  };
}

const OUT_OF_SYNC_ANNOTATION = 'volcano.sh/controller-out-of-sync';
const LOST_DISRUPTIONS = new Set(['DeletionByTaintManager', 'DeletionByPodGC']);
const EVICTION_DISRUPTIONS = new Set([
  'EvictionByEvictionAPI',
  'TerminationByKubelet',
  'PreemptionByScheduler',
]);

export function summarizePod(o: Raw): PodSummary | undefined {
  const jobId = jobIdOf(o);
  if (jobId === undefined) return undefined;
  const name = str(o.metadata.name);
  const index = o.metadata.labels?.[VOLCANO_TASK_INDEX_LABEL] ?? taskIndexFromPodName(name);
  const rank = Number(index);
  if (!Number.isInteger(rank) || rank < 0) return undefined;
  const status = o.status ?? {};
  const conditions: Raw[] = Array.isArray(status.conditions) ? status.conditions : [];
  const condition = (type: string) => conditions.find((c) => c?.type === type);
  const disruption = condition('DisruptionTarget');
  const disruptedBy = disruption?.status === 'True' ? str(disruption.reason) : '';
  const scheduled = condition('PodScheduled');
  const container = (Array.isArray(status.containerStatuses) ? status.containerStatuses : []).find(
    (c: Raw) => c?.name === USER_CONTAINER_NAME,
  );
  const terminated = container?.state?.terminated;
  const phase = str(status.phase) || 'Pending';
  const reason = str(status.reason);
  return {
    jobId,
    namespace: str(o.metadata.namespace),
    name,
    rank,
    phase,
    reason,
    message: str(status.message),
    ip: str(status.podIP),
    ready: condition('Ready')?.status === 'True',
    unschedulable: scheduled?.status === 'False' ? str(scheduled.message) || str(scheduled.reason) : '',
    ...(terminated
      ? {
          ended: {
            exitCode: num(terminated.exitCode),
            reason: str(terminated.reason),
            ...(typeof terminated.signal === 'number' ? { signal: terminated.signal } : {}),
            ...(Number.isFinite(Date.parse(terminated.finishedAt))
              ? { finishedAt: Date.parse(terminated.finishedAt) }
              : {}),
          },
        }
      : {}),
    started: Boolean(container?.state?.running || terminated),
    lost: phase === 'Unknown' || reason === 'NodeLost' || LOST_DISRUPTIONS.has(disruptedBy),
    evicted: reason === 'Evicted' || EVICTION_DISRUPTIONS.has(disruptedBy),
    killedByController: o.metadata.annotations?.[OUT_OF_SYNC_ANNOTATION] === 'true',
    deleting: Boolean(o.metadata.deletionTimestamp),
  };
}

export function summarizePodGroup(o: Raw): PodGroupSummary | undefined {
  const jobId = jobIdOf(o);
  if (jobId === undefined) return undefined;
  const conditions: Raw[] = Array.isArray(o.status?.conditions) ? o.status.conditions : [];
  const unschedulable = conditions.find((c) => c?.type === 'Unschedulable' && c?.status === 'True');
  return {
    jobId,
    phase: str(o.status?.phase),
    unschedulable: unschedulable ? str(unschedulable.message) || str(unschedulable.reason) : '',
  };
}

export type Report = Pick<BackendEvent, 'state' | 'status' | 'exitCodes'>;

/**
 * The job's state and status text from its Volcano Job, its pods and its PodGroup
 * (research/ucloud.md §1.4 and §3.1, with the SPEC's meaning of SUCCESS and FAILURE: a job the
 * platform ran to its end is a SUCCESS whatever its exit codes; a job the platform failed —
 * out of memory, evicted, its node lost, aborted — is a FAILURE). `current` is the state last
 * reported: phases in between keep it and change only the text.
 */
export function reportOf(
  job: JobSummary,
  pods: Iterable<PodSummary>,
  group: PodGroupSummary | undefined,
  current: BackendEvent['state'] | undefined,
): Report {
  const podList = [...pods].sort((a, b) => a.rank - b.rank);
  const detail = [job.reason, job.message].filter((s) => s !== '').join(': ');
  const keep = current ?? 'IN_QUEUE';
  switch (job.phase) {
    case 'Pending': {
      const why =
        group?.unschedulable || podList.find((p) => p.unschedulable !== '')?.unschedulable || job.message;
      // Volcano goes back to Pending when too many replicas wait again (one was restarted).
      if (current === 'RUNNING')
        return { state: 'RUNNING', status: `The job waits for replicas again${why ? ` (${why})` : ''}` };
      return { state: 'IN_QUEUE', status: `The job is waiting in the queue${why ? `: ${why}` : ''}` };
    }
    case 'Running':
      return {
        state: 'RUNNING',
        status: `The job is running (${job.running}/${job.minAvailable} ready)`,
      };
    case 'Restarting':
      return { state: keep, status: `The job is restarting${detail ? ` (${detail})` : ''}` };
    case 'Completing':
    case 'Terminating':
    case 'Aborting':
      return { state: keep, status: `The job is ending (${job.phase}${detail ? `: ${detail}` : ''})` };
    case 'Completed':
    case 'Failed':
    case 'Terminated':
    case 'Aborted':
      return endReport(job, podList, detail);
    default:
      return {
        state: keep,
        status: `Volcano reports the job as ${job.phase}${detail ? ` (${detail})` : ''}`,
      };
  }
}

/**
 * When an ended job's run ended: when its last rank ended, as the kubelets recorded it — not when
 * ucompute learnt of it, which after a takeover can be long after — and never after `now` (the
 * machines' clocks may differ); `now` when no rank says (their pods were deleted).
 */
export function endTime(pods: Iterable<PodSummary>, now: number): number {
  let last: number | undefined;
  for (const p of pods) {
    const at = p.ended?.finishedAt;
    if (at !== undefined && (last === undefined || at > last)) last = at;
  }
  return last === undefined ? now : Math.min(last, now);
}

function endReport(job: JobSummary, pods: PodSummary[], detail: string): Report {
  const exitCodes: Record<string, number> = {};
  for (const p of pods) if (p.ended) exitCodes[String(p.rank)] = p.ended.exitCode;
  const codes = Object.keys(exitCodes).length > 0 ? { exitCodes } : {};

  const fault = platformFault(pods);
  if (fault) return { state: 'FAILURE', status: `The job failed: ${fault}`, ...codes };
  if (job.phase === 'Aborted')
    return { state: 'FAILURE', status: `Volcano aborted the job${detail ? ` (${detail})` : ''}`, ...codes };
  if (job.phase === 'Failed' && pods.every((p) => !p.ended))
    return { state: 'FAILURE', status: `Volcano failed the job${detail ? ` (${detail})` : ''}`, ...codes };

  const nonZero = Object.entries(exitCodes).filter(([, code]) => code !== 0);
  if (Object.keys(exitCodes).length === 0) return { state: 'SUCCESS', status: 'The job finished' };
  if (nonZero.length === 0)
    return { state: 'SUCCESS', status: 'The job finished (exit code 0 on every rank)', ...codes };
  const listed = nonZero.slice(0, 8).map(([rank, code]) => `rank ${rank}: ${code}`);
  const more = nonZero.length > 8 ? `, and ${nonZero.length - 8} more` : '';
  return {
    state: 'SUCCESS',
    status: `The job finished with non-zero exit codes (${listed.join(', ')}${more})`,
    ...codes,
  };
}

/** Why the platform, not the application, ended the job; undefined when it did not. */
function platformFault(pods: PodSummary[]): string | undefined {
  for (const p of pods) {
    if (p.ended?.reason === 'OOMKilled') return `rank ${p.rank} ran out of memory (OOMKilled)`;
  }
  for (const p of pods) {
    if (p.evicted) return `rank ${p.rank} was evicted${p.message ? ` (${p.message})` : ''}`;
  }
  for (const p of pods) {
    if (p.lost) return `rank ${p.rank} was lost with its node${p.message ? ` (${p.message})` : ''}`;
  }
  // Volcano's controller deletes the other ranks once one is lost: the first seen is the cause.
  const [deleted] = pods
    .filter((p) => p.deletedUnexpectedly && !p.ended)
    .sort((a, b) => (a.deletedSeenAt ?? 0) - (b.deletedSeenAt ?? 0));
  return deleted ? `rank ${deleted.rank}'s pod was deleted while the job ran` : undefined;
}
