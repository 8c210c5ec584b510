import { DEFAULT_MAX_RETRY, type PodEvent } from '../api/phases.ts';
import type { TaskSpec, VolcanoAction, VolcanoJob, VolcanoJobPhase } from '../api/types.ts';
import { podName } from './conventions.ts';

/**
 * Volcano's job controller as pure decisions (research/volcano.md §2.2–2.3): which action a pod
 * event triggers, and which phase a job's pod counts put it in. The local backend carries them out.
 */

/** Task policies first, then the job's: the first whose events (or `*`) or exit code match. */
export function policyAction(
  job: VolcanoJob,
  task: TaskSpec | undefined,
  event: PodEvent,
  exitCode?: number,
): VolcanoAction | undefined {
  for (const policies of [task?.policies ?? [], job.spec.policies ?? []]) {
    for (const p of policies) {
      if (p.timeout !== undefined) continue; // delayed actions are not offered locally
      const events = [...(p.event !== undefined ? [p.event] : []), ...(p.events ?? [])];
      if (events.includes(event) || events.includes('*')) return p.action;
      if (p.exitCode !== undefined && exitCode !== undefined && p.exitCode === exitCode) return p.action;
    }
  }
  return undefined;
}

export interface PodCounts {
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  /** Pods being killed, not yet gone. */
  terminating: number;
  /** Succeeded pods per task name. */
  succeededByTask: Record<string, number>;
}

export const taskMinAvailable = (t: TaskSpec): number => t.minAvailable ?? t.replicas;
export const totalReplicas = (job: VolcanoJob): number => job.spec.tasks.reduce((n, t) => n + t.replicas, 0);
/** The gang size: the job's minAvailable, or the sum of its tasks' (admission's default). */
export const jobMinAvailable = (job: VolcanoJob): number =>
  job.spec.minAvailable ?? job.spec.tasks.reduce((n, t) => n + taskMinAvailable(t), 0);

/**
 * The pods the gang starts with, by name, in task order (Volcano's PodGroup minResources): each
 * task's minAvailable, then further replicas up to the job's minAvailable; or, when the job's
 * minAvailable is below its tasks' sum (an elastic job), its first minAvailable of those. The
 * other pods run when capacity allows.
 */
export function gangPodNames(job: VolcanoJob): string[] {
  const wanted = jobMinAvailable(job);
  const names: string[] = [];
  const take = (task: TaskSpec, from: number, to: number) => {
    for (let i = from; i < to && names.length < wanted; i++)
      names.push(podName(job.metadata.name, task.name, i));
  };
  for (const t of job.spec.tasks) take(t, 0, taskMinAvailable(t));
  for (const t of job.spec.tasks) take(t, taskMinAvailable(t), t.replicas);
  return names;
}

/**
 * Whether a task's pods may be created (the controller's `waitDependsOnTaskMeetCondition`): every
 * task it depends on (with `iteration: any` and several, one of them) has at least its
 * minAvailable pods Running or Succeeded. `started` counts those per task.
 */
export function dependenciesMet(job: VolcanoJob, task: TaskSpec, started: Record<string, number>): boolean {
  const dependsOn = task.dependsOn;
  if (!dependsOn) return true;
  const ready = (name: string) => {
    const dependency = job.spec.tasks.find((t) => t.name === name);
    return dependency !== undefined && (started[name] ?? 0) >= taskMinAvailable(dependency);
  };
  return dependsOn.name.length > 1 && dependsOn.iteration === 'any'
    ? dependsOn.name.some(ready)
    : dependsOn.name.every(ready);
}

/** What a kill action does: the phase it leads to, and whether finished pods are kept ("soft"). */
export function killFor(action: VolcanoAction): { phase: VolcanoJobPhase; soft: boolean; retry: boolean } {
  switch (action) {
    case 'AbortJob':
      return { phase: 'Aborting', soft: true, retry: false };
    case 'CompleteJob':
      return { phase: 'Completing', soft: true, retry: false };
    case 'TerminateJob':
      return { phase: 'Terminating', soft: true, retry: false };
    case 'RestartJob':
    case 'RestartTask':
    case 'RestartPod':
      return { phase: 'Restarting', soft: false, retry: true };
    case 'ResumeJob':
      return { phase: 'Restarting', soft: true, retry: true };
  }
}

/** SyncJob's phase function: where the counts put the job now (one step; repeat until it holds). */
export function syncPhase(
  job: VolcanoJob,
  phase: VolcanoJobPhase,
  c: PodCounts,
  retryCount: number,
): VolcanoJobPhase {
  const replicas = totalReplicas(job);
  const minAvailable = jobMinAvailable(job);
  const alive = c.terminating + c.pending + c.running;
  switch (phase) {
    case 'Pending':
      return minAvailable <= c.running + c.succeeded + c.failed ? 'Running' : 'Pending';
    case 'Running': {
      if (replicas === 0) return phase;
      const minSuccess = job.spec.minSuccess;
      if (minSuccess !== undefined && c.succeeded >= minSuccess) return 'Completed';
      if (c.succeeded + c.failed === replicas) {
        const taskSum = job.spec.tasks.reduce((n, t) => n + taskMinAvailable(t), 0);
        const taskShort = job.spec.tasks.some((t) => (c.succeededByTask[t.name] ?? 0) < taskMinAvailable(t));
        if ((minAvailable >= taskSum && taskShort) || minSuccess !== undefined) return 'Failed';
        return c.succeeded >= minAvailable ? 'Completed' : 'Failed';
      }
      return c.pending > replicas - minAvailable ? 'Pending' : 'Running';
    }
    case 'Restarting':
      if (retryCount >= (job.spec.maxRetry ?? DEFAULT_MAX_RETRY)) return 'Failed';
      return c.terminating === 0 && replicas - c.terminating >= minAvailable ? 'Pending' : 'Restarting';
    case 'Aborting':
      return alive === 0 ? 'Aborted' : phase;
    case 'Completing':
      return alive === 0 ? 'Completed' : phase;
    case 'Terminating':
      return alive === 0 ? 'Terminated' : phase;
    default:
      return phase;
  }
}
