import { join } from 'node:path';
import type { BackendEvent } from '../../../jobs/backend.ts';
import type { PodPhase } from '../../../volcano/api/phases.ts';
import type { Companion, VolcanoJob, VolcanoJobPhase } from '../../../volcano/api/types.ts';
import { gangPodNames } from '../../../volcano/emulation/job-controller.ts';
import { planPods } from '../../../volcano/emulation/plugins/index.ts';
import type { PluginState, PodPlan } from '../../../volcano/emulation/plugins/plugin.ts';
import { MAX_TIME_ANNOTATION, PIDS_LIMIT_ANNOTATION } from '../../../volcano/labels.ts';
import { volcanoJobName } from '../../../volcano/names.ts';
import { podRequest } from '../containers.ts';
import type { ContainerExit, Pod } from '../runtime.ts';
import { NO_RESOURCES, plus, type Resources } from '../scheduler.ts';

/** One pod of a job as the controller sees it. */
export interface PodRecord {
  plan: PodPlan;
  phase: PodPhase;
  pod?: Pod;
  exit?: ContainerExit;
  /** Why the platform could not run it, when that is what ended it. */
  fault?: string;
  /** Containers restarted in place (restartPolicy OnFailure/Always) count here. */
  restarts: number;
  killing: boolean;
  /** Running with every main container Ready (its startup and readiness probes passed; see prober.ts). */
  ready: boolean;
  /** When the pod was created: its activeDeadlineSeconds counts from then, across restarts of ucompute. */
  startedAt?: number;
}

/** What survives a restart of ucompute, in <stateDir>/jobs/<id>/state.{0,1}.json (see persistence.ts). */
export interface SavedJob {
  id: string;
  job: VolcanoJob;
  companions: Companion[];
  phase: VolcanoJobPhase;
  retryCount: number;
  admitted: boolean;
  submittedAt: number;
  plugins: PluginState;
  /** Why the platform ended the job, when it did. */
  fault?: string;
  /** The pod event and policy that ended the job, when one did (see end-messages.ts). */
  cause?: string;
  /** When its pods were gone, for ttlSecondsAfterFinished (finished-ttl.ts). */
  finishedAt?: number;
  /** The host port of its SSH endpoint, opened again after a restart of ucompute. */
  sshPort?: number;
  pods: {
    name: string;
    phase: PodPhase;
    exit?: ContainerExit;
    fault?: string;
    restarts: number;
    startedAt?: number;
  }[];
}

/** A job on this machine: what is saved of it, and what the controller keeps while it runs. */
export interface JobRun extends Omit<SavedJob, 'pods'> {
  pods: Map<string, PodRecord>;
  /** The pods the gang starts with (the job's minAvailable), and what they need together. */
  gang: Set<string>;
  demand: Resources;
  timeLimitMs: number | null;
  startedAt: number | null;
  /** The last phase told to phase listeners. */
  toldPhase?: VolcanoJobPhase;
  /** The last event reported, to say each thing once, and its state. */
  said: string;
  saidState?: BackendEvent['state'];
  /** Lines told with `notify`. */
  notices: Set<string>;
  /** Steps on one job run one after the other. */
  chain: Promise<void>;
  /** Woken on every log write check and at the end. */
  ended: Promise<void>;
  end: () => void;
  planned: PodPlan[];
}

/** A run of a job that was submitted or found again, with no pods yet. */
export function newRun(saved: Omit<SavedJob, 'pods'>): JobRun {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  const maxTime = Number(saved.job.metadata.annotations?.[MAX_TIME_ANNOTATION]);
  const planned = planPods(saved.job, saved.plugins);
  const gang = new Set(gangPodNames(saved.job));
  return {
    ...saved,
    pods: new Map(),
    gang,
    demand: planned
      .filter((p) => gang.has(p.name))
      .map(podRequest)
      .reduce(plus, NO_RESOURCES),
    timeLimitMs: Number.isFinite(maxTime) && maxTime > 0 ? maxTime : null,
    startedAt: null,
    said: '',
    notices: new Set(),
    chain: Promise.resolve(),
    ended,
    end,
    planned,
  };
}

/** What is saved of a run. */
export function savedJob(run: JobRun): SavedJob {
  return {
    id: run.id,
    job: run.job,
    companions: run.companions,
    phase: run.phase,
    retryCount: run.retryCount,
    admitted: run.admitted,
    submittedAt: run.submittedAt,
    plugins: run.plugins,
    ...(run.fault ? { fault: run.fault } : {}),
    ...(run.cause ? { cause: run.cause } : {}),
    ...(run.finishedAt !== undefined ? { finishedAt: run.finishedAt } : {}),
    ...(run.sshPort !== undefined ? { sshPort: run.sshPort } : {}),
    pods: [...run.pods.values()].map((p) => ({
      name: p.plan.name,
      phase: p.phase,
      restarts: p.restarts,
      ...(p.exit ? { exit: p.exit } : {}),
      ...(p.fault ? { fault: p.fault } : {}),
      ...(p.startedAt !== undefined ? { startedAt: p.startedAt } : {}),
    })),
  };
}

/** Where a job's state, hosts file and logs are: <stateDir>/jobs/<id>. */
export const jobDir = (jobsDir: string, id: string) => join(jobsDir, id);

/** One container's stream: container names are DNS labels, so no two containers share a file. */
export const logFile = (
  jobsDir: string,
  id: string,
  rank: number,
  container: string,
  stream: 'out' | 'err',
) => join(jobDir(jobsDir, id), 'logs', `${rank}.${container}.${stream}`);

/** The containers of a rank, in the order they run: init containers, then the main ones. */
export function rankContainers(run: JobRun, rank: number): string[] {
  const spec = run.planned.find((p) => p.rank === rank)?.task.template.spec;
  return spec ? [...(spec.initContainers ?? []), ...spec.containers].map((c) => c.name) : [];
}

/** The product's process limit for each replica; null: the runtime's default. */
export function pidsLimit(job: VolcanoJob): number | null {
  const pids = Number(job.metadata.annotations?.[PIDS_LIMIT_ANNOTATION]);
  return Number.isInteger(pids) && pids > 0 ? pids : null;
}

/** The runtime's name for a pod: unique on the machine (the job id is), whatever the job's name. */
export function runtimePodName(run: { id: string; job: VolcanoJob }, plan: PodPlan): string {
  return run.job.metadata.name === volcanoJobName(run.id)
    ? plan.name
    : `${run.id}-${plan.task.name}-${plan.index}`;
}
