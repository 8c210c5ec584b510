import type { BackendEvent } from '../../../jobs/backend.ts';
import type { Clock } from '../../../model/clock.ts';
import type { VolcanoJobPhase } from '../../../volcano/api/types.ts';
import type { Waiting } from '../scheduler.ts';
import type { JobRun } from './job-run.ts';
import { jobStatus } from './job-status.ts';

/**
 * What the backend tells: job events to the service (each change once, kept until a listener
 * comes) and phases to phase listeners. Listeners are called synchronously and must not throw.
 */
export interface JobReports {
  /** Tells the job's state once per change; `at` is when it happened (an end precedes saving its output). */
  report(run: JobRun, waiting?: Waiting, at?: number): void;
  /** A line in the job's updates that does not change its state; each said once per job. */
  notify(run: JobRun, status: string): void;
  /** Tells phase listeners the run's phase, if it changed since they were last told. */
  tellPhase(run: JobRun): void;
  onEvent(listener: (e: BackendEvent) => void): void;
  onPhase(listener: (jobId: string, phase: VolcanoJobPhase) => void): void;
  /** Nothing about the job reaches the service while `during` runs (a suspend's end is not the job's). */
  silenced<T>(jobId: string, during: () => Promise<T>): Promise<T>;
}

export function jobReports(clock: Clock): JobReports {
  const listeners: ((e: BackendEvent) => void)[] = [];
  const phaseListeners: ((jobId: string, phase: VolcanoJobPhase) => void)[] = [];
  const pending: BackendEvent[] = [];
  const silenced = new Set<string>();
  const emit = (e: BackendEvent) => {
    if (silenced.has(e.jobId)) return;
    if (listeners.length === 0) pending.push(e);
    for (const l of listeners) l(e);
  };
  return {
    report(run, waiting, at = clock.now()) {
      const event = jobStatus(run, waiting);
      if (!event) return;
      const key = `${event.state}:${event.status}`;
      if (key === run.said) return;
      run.said = key;
      run.saidState = event.state;
      emit({ ...event, jobId: run.id, at });
    },
    notify(run, status) {
      if (run.notices.has(status)) return;
      run.notices.add(status);
      // Containers start once the job is admitted, which may be before "The job is starting" is said.
      const state = run.saidState ?? 'IN_QUEUE';
      run.said = `${state}:${status}`;
      emit({ state, status, jobId: run.id, at: clock.now() });
    },
    tellPhase(run) {
      if (run.phase === run.toldPhase) return;
      run.toldPhase = run.phase;
      for (const l of phaseListeners) l(run.id, run.phase);
    },
    onEvent(listener) {
      listeners.push(listener);
      for (const e of pending.splice(0)) listener(e);
    },
    onPhase(listener) {
      phaseListeners.push(listener);
    },
    async silenced(jobId, during) {
      silenced.add(jobId);
      try {
        return await during();
      } finally {
        silenced.delete(jobId);
      }
    },
  };
}
