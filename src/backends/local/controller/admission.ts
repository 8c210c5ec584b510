import { isFinalPhase } from '../../../volcano/api/phases.ts';
import type { Resources } from '../scheduler.ts';
import type { LocalContext } from './context.ts';
import { admissions, freeCapacity, mayGrow } from './decisions.ts';
import type { JobRun } from './job-run.ts';

/** Gang admission on this machine: which waiting jobs start, and which running ones may grow. */
export interface Admission {
  /**
   * Admits the waiting jobs that fit, in fair order, and tells the others where they stand; then
   * lets admitted jobs add replicas beyond their gang where they fit. Runs once per turn of the
   * event loop however often it is asked for.
   */
  reschedule(): void;
  /** What the machine has free now. */
  free(): Resources;
}

/** `sync` is asked to run SyncJob on a job just admitted or with room to grow. */
export function admission(ctx: LocalContext, sync: (run: JobRun) => void): Admission {
  let scheduling = false;
  let again = false;
  /** When each queue last had a job started: owners at equal shares take turns by it. */
  const lastStarts = new Map<string, number>();
  const free = () => freeCapacity(ctx.runtime.capacity, ctx.runs.values(), ctx.requestOf);

  function pass(): void {
    const active = [...ctx.runs.values()].filter((r) => !isFinalPhase(r.phase));
    if (active.some((r) => !r.admitted)) {
      const now = ctx.clock.now();
      const decision = admissions(active, ctx.runtime.capacity, now, lastStarts, ctx.requestOf);
      for (const id of decision.start) {
        const run = ctx.runs.get(id)!;
        run.admitted = true;
        lastStarts.set(run.job.spec.queue ?? 'default', ctx.clock.now());
        sync(run);
      }
      for (const [id, w] of decision.waiting) ctx.reports.report(ctx.runs.get(id)!, w);
    }
    // After the admissions, so that replicas beyond a gang never take a waiting job's turn.
    const room = free();
    for (const run of active) if (mayGrow(run, room, ctx.requestOf)) sync(run);
  }

  function reschedule(): void {
    if (scheduling) {
      again = true;
      return;
    }
    scheduling = true;
    setImmediate(() => {
      scheduling = false;
      pass();
      if (again) {
        again = false;
        reschedule();
      }
    });
  }

  return { reschedule, free };
}
