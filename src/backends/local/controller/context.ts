import type { Logger } from 'pino';
import type { Clock } from '../../../model/clock.ts';
import type { PodPlan } from '../../../volcano/emulation/plugins/plugin.ts';
import { podRequest, type VolumeSources } from '../containers.ts';
import type { LogRotation } from '../pod/context.ts';
import type { Runtime } from '../runtime.ts';
import type { Resources } from '../scheduler.ts';
import type { JobRun } from './job-run.ts';
import type { JobReports } from './reports.ts';

/** What the parts of the local backend share: its settings, its jobs and what it tells. */
export interface LocalContext {
  runtime: Runtime;
  clock: Clock;
  log: Logger | undefined;
  stateDir: string;
  /** <stateDir>/jobs: one folder per job (jobDir). */
  jobsDir: string;
  volumes: Omit<VolumeSources, 'companions' | 'claimsRoot'>;
  /** SIGTERM first, SIGKILL after this long. */
  graceMs: number;
  rotation: LogRotation;
  runs: Map<string, JobRun>;
  /** Ended jobs, oldest first: the oldest are forgotten past ENDED_KEPT or `retained.limitBytes`. */
  endedOrder: string[];
  /** What the ended jobs' kept folders (state and logs) hold: each one's bytes, and their bound. */
  retained: { limitBytes: number; bytes: Map<string, number> };
  /** Set when the backend closes: what still runs is the next ucompute's to take over. */
  closed: boolean;
  reports: JobReports;
  /** A planned pod's request, parsed once: the scheduler asks for them on every pass. */
  requestOf(plan: PodPlan): Resources;
}

/** A request cache for `LocalContext.requestOf`. */
export function requestCache(): (plan: PodPlan) => Resources {
  const requests = new WeakMap<PodPlan, Resources>();
  return (plan) => {
    const known = requests.get(plan);
    if (known) return known;
    const request = podRequest(plan);
    requests.set(plan, request);
    return request;
  };
}
