import { DEFAULT_MAX_RETRY, isFinalPhase } from '../../../volcano/api/phases.ts';
import type { VolcanoAction, VolcanoJobPhase } from '../../../volcano/api/types.ts';
import {
  dependenciesMet,
  killFor,
  type PodCounts,
  policyAction,
  syncPhase,
} from '../../../volcano/emulation/job-controller.ts';
import type { PodPlan } from '../../../volcano/emulation/plugins/plugin.ts';
import { FAIR_SHARE_WEIGHT_ANNOTATION } from '../../../volcano/labels.ts';
import type { ContainerExit } from '../runtime.ts';
import {
  fits,
  type LastStarts,
  minus,
  NO_RESOURCES,
  plus,
  type Resources,
  type Schedule,
  schedule,
} from '../scheduler.ts';
import type { JobRun, PodRecord } from './job-run.ts';

/**
 * The local job controller's decisions, as pure functions of a job's observed state (and the time,
 * where it matters) to what is to be done: the controller (controller.ts) carries them out. None
 * reads a clock, a file or a process, and none changes what it is given.
 */

/** A container that keeps failing past its task's maxRetry restarts after this, doubling up to the cap (the kubelet's CrashLoopBackOff). */
export const CRASH_BACKOFF_MS = 10_000;
export const CRASH_BACKOFF_MAX_MS = 300_000;

/** How long the `overRetries`-th restart past the task's maxRetry waits (1: 10 s, then doubling, at most 5 min). */
export const crashBackoffMs = (overRetries: number): number =>
  Math.min(CRASH_BACKOFF_MS * 2 ** (overRetries - 1), CRASH_BACKOFF_MAX_MS);

/** The job's pods counted as Volcano's controller counts them; a pod being killed is terminating. */
export function podCounts(pods: Iterable<PodRecord>): PodCounts {
  const c: PodCounts = {
    pending: 0,
    running: 0,
    succeeded: 0,
    failed: 0,
    terminating: 0,
    succeededByTask: {},
  };
  for (const p of pods) {
    if (p.killing) c.terminating++;
    else if (p.phase === 'Pending') c.pending++;
    else if (p.phase === 'Running') c.running++;
    else if (p.phase === 'Succeeded') {
      c.succeeded++;
      c.succeededByTask[p.plan.task.name] = (c.succeededByTask[p.plan.task.name] ?? 0) + 1;
    } else c.failed++;
  }
  return c;
}

/**
 * SyncJob's phase: syncPhase applied until it holds (a few steps at most); `enteredRunning` when
 * one of the steps was Running (the job's time starts then, if it had not).
 */
export function syncedPhase(run: Pick<JobRun, 'job' | 'phase' | 'retryCount' | 'pods'>): {
  phase: VolcanoJobPhase;
  enteredRunning: boolean;
} {
  const counts = podCounts(run.pods.values());
  let phase = run.phase;
  let enteredRunning = false;
  for (let i = 0; i < 4; i++) {
    const next = syncPhase(run.job, phase, counts, run.retryCount);
    if (next === phase) break;
    phase = next;
    if (next === 'Running') enteredRunning = true;
  }
  return { phase, enteredRunning };
}

/**
 * Why a container ended that the job did not decide: its supervisor vanished, its sandbox failed
 * (its exit code is then the sandbox's, not the application's), or SIGKILL that was neither
 * ucompute's nor the OOM killer's (a replica ucompute stops is not watched any more).
 * Nothing in a sandbox tells a command's own `exit 137` from SIGKILL; both read as SIGKILL here.
 */
export function killedFromOutside(rank: number, exit: ContainerExit): string | null {
  if (exit.supervisorLost) return `ucompute lost the supervisor of rank ${rank}`;
  if (exit.sandboxFailure) return `Rank ${rank} could not run: its sandbox failed: ${exit.sandboxFailure}`;
  if (exit.signal === 'SIGKILL' && !exit.oomKilled) {
    return `Rank ${rank} was killed by SIGKILL from outside the job`;
  }
  return null;
}

/** What a pod's main containers ending means for the pod and the job. */
export type ExitDecision =
  /** The pod was being killed, was replaced, or the job is over: nothing. */
  | { kind: 'ignore' }
  /** Not the application's outcome: no in-place restart hides it, the pod fails saying so. */
  | { kind: 'killedFromOutside'; fault: string }
  /** The kubelet restarts the container in place after `backoffMs` (0: at once); the pod stays Running. */
  | { kind: 'restartInPlace'; backoffMs: number }
  /** Past the task's maxRetry with a TaskFailed policy: the pod fails and the policy's action runs. */
  | { kind: 'taskFailed'; action: VolcanoAction }
  | { kind: 'podFailed' }
  /** `taskCompleted`: every replica of its task has now succeeded. */
  | { kind: 'podSucceeded'; taskCompleted: boolean };

/** The six outcomes of a pod's containers ending (restartInPlace and taskFailed count a restart). */
export function exitDecision(
  run: Pick<JobRun, 'job' | 'phase' | 'pods'>,
  rec: PodRecord,
  exit: ContainerExit,
): ExitDecision {
  if (rec.killing || isFinalPhase(run.phase) || !run.pods.has(rec.plan.name)) return { kind: 'ignore' };
  const outside = killedFromOutside(rec.plan.rank, exit);
  if (outside) return { kind: 'killedFromOutside', fault: outside };
  const task = rec.plan.task;
  const restartPolicy = task.template.spec.restartPolicy ?? 'Always';
  const restart =
    !exit.oomKilled && (restartPolicy === 'Always' || (restartPolicy === 'OnFailure' && exit.exitCode !== 0));
  const ofTask = [...run.pods.values()].filter((p) => p.plan.task.name === task.name);
  if (restart && run.phase === 'Running') {
    const taskRestarts = ofTask.reduce((n, p) => n + p.restarts, 0) + 1; // this one included
    const maxRetry = task.maxRetry ?? DEFAULT_MAX_RETRY;
    const overRetries = maxRetry !== -1 ? taskRestarts - maxRetry : -1;
    if (overRetries >= 0) {
      const action = policyAction(run.job, task, 'TaskFailed', exit.exitCode);
      if (action) return { kind: 'taskFailed', action };
      // No policy for TaskFailed: the controller does nothing and the job stays Running while
      // the kubelet keeps restarting the container, with back-off.
    }
    return { kind: 'restartInPlace', backoffMs: overRetries <= 0 ? 0 : crashBackoffMs(overRetries) };
  }
  if (exit.exitCode !== 0 || exit.oomKilled) return { kind: 'podFailed' };
  const succeeded = ofTask.filter((p) => p === rec || p.phase === 'Succeeded').length;
  return { kind: 'podSucceeded', taskCompleted: succeeded === task.replicas };
}

/** Whether a restart that waited out its back-off is still wanted: the same pod, not killed, the job Running. */
export const restartStillWanted = (run: Pick<JobRun, 'pods' | 'phase'>, rec: PodRecord): boolean =>
  run.pods.get(rec.plan.name) === rec && !rec.killing && !rec.pod && run.phase === 'Running';

/** What a policy's action (or a cancel) does to the job: its next retry count and phase, and the pods it kills. */
export interface KillDecision {
  retryCount: number;
  phase: VolcanoJobPhase;
  victims: PodRecord[];
  /** RestartJob: the plugins run again (OnJobDelete, then OnJobAdd), giving new keys. */
  preparePluginsAgain: boolean;
}

/** null when the job is already over. */
export function killDecision(
  run: Pick<JobRun, 'job' | 'phase' | 'retryCount' | 'pods'>,
  action: VolcanoAction,
  target?: PodRecord,
): KillDecision | null {
  if (isFinalPhase(run.phase)) return null;
  const effect = killFor(action);
  const retryCount = run.retryCount + (effect.retry ? 1 : 0);
  // The last retry keeps finished pods, as Volcano does, so their exit codes and logs survive.
  const soft = effect.soft || retryCount >= (run.job.spec.maxRetry ?? DEFAULT_MAX_RETRY);
  const victims = [...run.pods.values()].filter((p) => {
    if (action === 'RestartPod') return p === target;
    if (action === 'RestartTask') return p.plan.task.name === target?.plan.task.name;
    return soft ? p.phase === 'Pending' || p.phase === 'Running' : true;
  });
  return { retryCount, phase: effect.phase, victims, preparePluginsAgain: action === 'RestartJob' };
}

/** Whether SyncJob makes pods now: the job is admitted and starting or running. */
export const makesPods = (run: Pick<JobRun, 'admitted' | 'phase'>): boolean =>
  run.admitted && (run.phase === 'Pending' || run.phase === 'Running');

/**
 * SyncJob's pod creation, which pod starts next: the planned pods the job lacks, once the tasks
 * they depend on run; the gang's were admitted with the job, the others (an elastic job's) only
 * where they fit what is free (asked for only when such a pod comes up).
 */
export function podsToCreate(
  run: Pick<JobRun, 'job' | 'pods' | 'planned' | 'gang'>,
  requestOf: (plan: PodPlan) => Resources,
  freeNow: () => Resources,
): PodPlan[] {
  const started: Record<string, number> = {};
  for (const p of run.pods.values()) {
    if (!p.killing && (p.phase === 'Running' || p.phase === 'Succeeded')) {
      started[p.plan.task.name] = (started[p.plan.task.name] ?? 0) + 1;
    }
  }
  let free: Resources | undefined;
  const fresh: PodPlan[] = [];
  for (const plan of run.planned) {
    if (run.pods.has(plan.name) || !dependenciesMet(run.job, plan.task, started)) continue;
    if (!run.gang.has(plan.name)) {
      free ??= freeNow();
      const need = requestOf(plan);
      if (!fits(need, free)) continue;
      free = minus(free, need);
    }
    fresh.push(plan);
  }
  return fresh;
}

/** What a job holds of the machine: its live pods, and the gang's pods not made yet. */
export function held(
  run: Pick<JobRun, 'planned' | 'pods' | 'gang'>,
  requestOf: (plan: PodPlan) => Resources,
) {
  let total = NO_RESOURCES;
  for (const plan of run.planned) {
    const rec = run.pods.get(plan.name);
    const alive = rec
      ? rec.killing || rec.phase === 'Pending' || rec.phase === 'Running'
      : run.gang.has(plan.name);
    if (alive) total = plus(total, requestOf(plan));
  }
  return total;
}

/** What is free on the machine: its capacity less what admitted, unfinished jobs hold. */
export function freeCapacity(
  capacity: Resources,
  runs: Iterable<JobRun>,
  requestOf: (plan: PodPlan) => Resources,
): Resources {
  let free = capacity;
  for (const r of runs) if (r.admitted && !isFinalPhase(r.phase)) free = minus(free, held(r, requestOf));
  return free;
}

/** An admitted job with a replica beyond its gang that waits for room and would fit in `free`. */
export const mayGrow = (run: JobRun, free: Resources, requestOf: (plan: PodPlan) => Resources): boolean =>
  makesPods(run) &&
  run.pods.size > 0 &&
  run.planned.some((p) => !run.pods.has(p.name) && !run.gang.has(p.name) && fits(requestOf(p), free));

/** Which waiting jobs are admitted now, and where the others stand (the scheduler's fair order). */
export function admissions(
  active: readonly JobRun[],
  capacity: Resources,
  now: number,
  lastStarts: LastStarts,
  requestOf: (plan: PodPlan) => Resources,
): Schedule {
  return schedule(
    capacity,
    active
      .filter((r) => r.admitted)
      .map((r) => ({
        id: r.id,
        queue: r.job.spec.queue ?? 'default',
        holds: held(r, requestOf),
        endsAt: r.timeLimitMs === null || r.startedAt === null ? null : r.startedAt + r.timeLimitMs,
      })),
    active
      .filter((r) => !r.admitted)
      .map((r) => ({
        id: r.id,
        queue: r.job.spec.queue ?? 'default',
        weight: Number(r.job.metadata.annotations?.[FAIR_SHARE_WEIGHT_ANNOTATION] ?? 1) || 1,
        demand: r.demand,
        submittedAt: r.submittedAt,
        timeLimitMs: r.timeLimitMs,
      })),
    now,
    lastStarts,
  );
}
