import type { VolcanoJobPhase } from './types.ts';

/** Volcano's phases and events as its API names them. */

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/** The events user policies can match; the controller raises them from pod changes. */
export type PodEvent = 'PodFailed' | 'PodEvicted' | 'TaskCompleted' | 'TaskFailed' | 'Unknown';

/** The CRD's default for both the job's and each task's maxRetry. */
export const DEFAULT_MAX_RETRY = 3;

/** The phases after which nothing of the job runs any more. */
export const FINAL_PHASES: readonly VolcanoJobPhase[] = ['Completed', 'Terminated', 'Failed', 'Aborted'];

/** Whether a job in `phase` is over; any text may be asked (a phase as read from a cluster). */
export function isFinalPhase(phase: string): boolean {
  return (FINAL_PHASES as readonly string[]).includes(phase);
}
