import { isFinalPhase } from '../../../volcano/api/phases.ts';
import type { PodPlan } from '../../../volcano/emulation/plugins/plugin.ts';
import type { JobRun, PodRecord } from './job-run.ts';

/**
 * A pod's `activeDeadlineSeconds`, as the kubelet keeps it: counted from the pod's start (its init
 * containers and in-place restarts included), and when it passes, the pod is killed and Failed
 * with reason DeadlineExceeded; the job's policies then see PodFailed. Pure functions; the
 * controller arms the timer.
 */

/** The pod's deadline in milliseconds after it starts; null when it has none. */
export function podDeadlineMs(plan: PodPlan): number | null {
  const seconds = plan.task.template.spec.activeDeadlineSeconds;
  return seconds === undefined ? null : seconds * 1000;
}

/** Whether the deadline still ends the pod: the same record, neither killed nor ended, in a live job. */
export const deadlineApplies = (run: Pick<JobRun, 'pods' | 'phase'>, rec: PodRecord): boolean =>
  run.pods.get(rec.plan.name) === rec &&
  !rec.killing &&
  (rec.phase === 'Pending' || rec.phase === 'Running') &&
  !isFinalPhase(run.phase);

/** The Failed pod's reason, in the kubelet's words. */
export const deadlineFault = (plan: PodPlan): string =>
  `Rank ${plan.rank} was stopped: DeadlineExceeded (the pod was active longer than its activeDeadlineSeconds, ${plan.task.template.spec.activeDeadlineSeconds} s)`;
