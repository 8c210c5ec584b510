import { isFinalPhase } from '../../../volcano/api/phases.ts';
import type { LocalContext } from './context.ts';
import type { JobController } from './controller.ts';
import { forgetAfterTtl } from './finished-ttl.ts';
import { type JobRun, newRun, type PodRecord, runtimePodName } from './job-run.ts';
import { keepEnded, savedJobs } from './persistence.ts';

/**
 * Finds the jobs of an earlier run of ucompute again: live pods re-adopted and watched, lost ones
 * failed as evicted (through the job's policies), pods no job claims destroyed. `reopen` is told
 * each unfinished job that had an SSH endpoint.
 */
export async function recoverJobs(
  ctx: LocalContext,
  controller: JobController,
  reopen: (run: JobRun) => Promise<unknown>,
): Promise<void> {
  const pods = new Map((await ctx.runtime.recover()).map((p) => [p.name, p]));
  for (const saved of await savedJobs(ctx)) {
    const run = newRun(saved);
    ctx.runs.set(run.id, run);
    if (isFinalPhase(run.phase)) {
      await keepEnded(ctx, run.id);
      // Ended when it did, not now: its end's time is what it is charged up to.
      ctx.reports.report(run, undefined, run.finishedAt);
      run.end();
      forgetAfterTtl(ctx, run);
      continue;
    }
    const lost: PodRecord[] = [];
    for (const s of saved.pods) {
      const plan = run.planned.find((p) => p.name === s.name);
      if (!plan) continue;
      const rec: PodRecord = { plan, phase: s.phase, restarts: s.restarts, killing: false, ready: false };
      // Saved since the pod deadlines; a pod an older ucompute saved counts from now.
      if (s.startedAt !== undefined) rec.startedAt = s.startedAt;
      if (s.exit) rec.exit = s.exit;
      if (s.fault) rec.fault = s.fault;
      run.pods.set(s.name, rec);
      if (rec.phase !== 'Running' && rec.phase !== 'Pending') continue;
      const pod = pods.get(runtimePodName(run, plan));
      pods.delete(runtimePodName(run, plan));
      const containers = pod?.containers() ?? [];
      if (pod && rec.phase === 'Running' && containers.length > 0) {
        rec.pod = pod;
        controller.adopt(
          run,
          rec,
          pod,
          containers.slice(-plan.task.template.spec.containers.length).map((c) => c.exited),
        );
      } else {
        await pod?.destroy(0);
        lost.push(rec);
      }
    }
    for (const rec of lost) {
      void controller.step(run, async () => {
        rec.phase = 'Failed';
        rec.fault = `Rank ${rec.plan.rank} was lost while ucompute restarted`;
        await controller.podEvent(run, rec, 'PodEvicted');
      });
    }
    if (lost.length === 0) ctx.reports.report(run);
    if (run.sshPort !== undefined) await reopen(run);
  }
  for (const orphan of pods.values()) await orphan.destroy(0);
  controller.admission.reschedule();
}
