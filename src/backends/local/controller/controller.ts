import { isFinalPhase, type PodEvent } from '../../../volcano/api/phases.ts';
import type { Companion, VolcanoAction, VolcanoJob } from '../../../volcano/api/types.ts';
import { policyAction } from '../../../volcano/emulation/job-controller.ts';
import { planPods, preparePlugins } from '../../../volcano/emulation/plugins/index.ts';
import type { ContainerExit, Pod } from '../runtime.ts';
import { type Admission, admission } from './admission.ts';
import type { LocalContext } from './context.ts';
import {
  exitDecision,
  killDecision,
  makesPods,
  podsToCreate,
  restartStillWanted,
  syncedPhase,
} from './decisions.ts';
import { endsJob, policyCause } from './end-messages.ts';
import { forgetAfterTtl } from './finished-ttl.ts';
import { type JobRun, newRun, type PodRecord } from './job-run.ts';
import { saveOutput } from './output.ts';
import { keepEnded, makeJobDir, saveRun } from './persistence.ts';
import { deadlineApplies, deadlineDueIn, deadlineFault } from './pod-deadline.ts';
import { podStarter } from './pod-start.ts';
import { startProbes } from './prober.ts';

/**
 * Volcano's job controller on this machine: it carries out the decisions (decisions.ts) on a
 * job's pods, one step of a job after the other, and keeps the job's saved state and its
 * reports up to date with each.
 */
export interface JobController {
  /** Takes a Volcano Job (once per id): it waits for admission, Pending with its reason while it cannot fit. */
  submit(id: string, job: VolcanoJob, companions: Companion[]): Promise<void>;
  /** Ends the run: a queued one at once, an admitted one through TerminateJob. */
  terminate(run: JobRun): Promise<void>;
  /** Runs a step of a job after the ones before it; a failing step fails the job, said clearly. */
  step(run: JobRun, what: () => Promise<void>): Promise<void>;
  /** A pod event through the job's policies; no matching policy means SyncJob. */
  podEvent(run: JobRun, rec: PodRecord, event: PodEvent): Promise<void>;
  /** Ends the job with the platform's `fault` (the first one said stays), through TerminateJob. */
  fail(run: JobRun, fault: string): Promise<void>;
  /** Ends a run whose phase is final: its pods go, its output is saved, its end is told. */
  finish(run: JobRun): Promise<void>;
  /** Takes a recovered running pod back: follows its containers to their end, probes it, arms its deadline. */
  adopt(run: JobRun, rec: PodRecord, pod: Pod, exits: Promise<ContainerExit>[]): void;
  admission: Admission;
}

/** `ended` is told each run that finished (after its pods are gone, before it is reported). */
export function jobController(ctx: LocalContext, ended: (run: JobRun) => void): JobController {
  const { reports } = ctx;
  const starter = podStarter(ctx, {
    step,
    running: (run, rec) => {
      startProbes(ctx, run, rec, rec.pod!, ctx.clock.now(), probeOutcomes);
      return sync(run);
    },
    failed: (run, rec) => podEvent(run, rec, 'PodFailed'),
    exited: containerExited,
  });
  const admitted = admission(ctx, (run) => void step(run, () => sync(run)));
  const probeOutcomes = { step, readiness: (run: JobRun) => sync(run), probeKilled };

  function step(run: JobRun, what: () => Promise<void>): Promise<void> {
    run.chain = run.chain.then(what).catch(async (err: unknown) => {
      ctx.log?.error({ err, jobId: run.id }, 'local job step failed');
      run.fault ??= `ucompute could not run the job: ${(err as Error).message}`;
      // Stopping the job can fail as the step did (a pod that cannot be destroyed): it then ends
      // without that, Terminated with its fault, rather than leave the chain rejected (which ended
      // the whole process as an unhandled rejection) or the job never ending.
      await kill(run, 'TerminateJob').catch(async (again: unknown) => {
        ctx.log?.error({ err: again, jobId: run.id }, 'local job could not be terminated');
        if (run.finishedAt !== undefined) return;
        if (!isFinalPhase(run.phase)) run.phase = 'Terminated';
        await finish(run);
      });
    });
    return run.chain;
  }

  /** SyncJob: phase from the counts, pods created when the job may have them, the end handled. */
  async function sync(run: JobRun): Promise<void> {
    const { phase, enteredRunning } = syncedPhase(run);
    run.phase = phase;
    if (enteredRunning) run.startedAt ??= ctx.clock.now();
    if (isFinalPhase(run.phase)) {
      await finish(run);
      return;
    }
    // Pods are made while the job starts and runs: dependent tasks and elastic replicas come later.
    if (makesPods(run)) await createPods(run);
    await saveRun(ctx, run);
    reports.report(run);
  }

  async function terminate(run: JobRun): Promise<void> {
    if (isFinalPhase(run.phase)) return;
    if (!run.admitted) {
      run.phase = 'Terminated';
      await step(run, () => finish(run));
      return;
    }
    await step(run, () => kill(run, 'TerminateJob'));
  }

  /** Carries out a policy's action (or a cancel) on the job. */
  async function kill(run: JobRun, action: VolcanoAction, target?: PodRecord): Promise<void> {
    const decision = killDecision(run, action, target);
    if (!decision) return;
    run.retryCount = decision.retryCount;
    run.phase = decision.phase;
    if (decision.preparePluginsAgain) run.plugins = await preparePlugins(run.job);
    for (const v of decision.victims) v.killing = true;
    await saveRun(ctx, run);
    reports.report(run);
    await Promise.all(decision.victims.map((v) => v.pod?.destroy(ctx.graceMs)));
    for (const v of decision.victims) run.pods.delete(v.plan.name); // deleted pods are gone, as in Kubernetes
    await sync(run);
  }

  async function podEvent(run: JobRun, rec: PodRecord, event: PodEvent): Promise<void> {
    const action = policyAction(run.job, rec.plan.task, event, rec.exit?.exitCode);
    if (action && endsJob(action)) run.cause ??= policyCause(rec, event, action);
    if (action) await kill(run, action, rec);
    else await sync(run);
  }

  /** The pod's main containers ended: the decision (exitDecision) carried out. */
  async function containerExited(run: JobRun, rec: PodRecord, exit: ContainerExit): Promise<void> {
    const decision = exitDecision(run, rec, exit);
    if (decision.kind === 'ignore') return;
    if (decision.kind === 'restartInPlace' || decision.kind === 'taskFailed') rec.restarts++;
    if (decision.kind !== 'restartInPlace') {
      rec.exit = exit;
      rec.phase = decision.kind === 'podSucceeded' ? 'Succeeded' : 'Failed';
      if (decision.kind === 'killedFromOutside' || decision.kind === 'podFailed') {
        if (decision.fault) rec.fault = decision.fault;
      }
    }
    // A finished pod's leftovers (daemons it started) end with it; a restarted one starts afresh.
    await rec.pod?.destroy(0);
    rec.pod = undefined;
    switch (decision.kind) {
      case 'killedFromOutside':
      case 'podFailed':
        await podEvent(run, rec, 'PodFailed');
        return;
      case 'taskFailed':
        await kill(run, decision.action, rec);
        return;
      case 'restartInPlace':
        rec.ready = false; // a restarted container is Ready again once its probes say so
        if (exit.probeFailure)
          ctx.reports.notify(run, `${exit.probeFailure}; it restarts (restart ${rec.restarts})`);
        // The pod stays Running while its container starts again, as a kubelet restart looks.
        if (decision.backoffMs === 0) {
          await startPods(run, [rec]);
          return;
        }
        ctx.clock.setTimeout(() => {
          void step(run, async () => {
            if (ctx.closed || !restartStillWanted(run, rec)) return;
            await startPods(run, [rec]);
          });
        }, decision.backoffMs);
        return;
      case 'podSucceeded':
        if (decision.taskCompleted) await podEvent(run, rec, 'TaskCompleted');
        else await sync(run);
        admitted.reschedule(); // what the pod held is free for waiting pods and jobs
    }
  }

  /**
   * The kubelet's answer to a failed liveness or startup probe: the container is killed (its
   * probe's grace), and its end is decided as any container's, saying which probe killed it.
   */
  async function probeKilled(run: JobRun, rec: PodRecord, pod: Pod, fault: string, graceMs: number) {
    if (rec.pod !== pod || rec.killing) return;
    // Forgotten while it is destroyed, so that its containers' ends are not taken for their own.
    rec.pod = undefined;
    await pod.destroy(graceMs);
    const mains = pod.containers().slice(-rec.plan.task.template.spec.containers.length);
    const [first] = await Promise.all(mains.map((c) => c.exited));
    await containerExited(run, rec, {
      ...(first ?? { exitCode: 137, signal: 'SIGKILL', oomKilled: false }),
      probeFailure: fault,
    });
  }

  /** SyncJob's pod creation: the pods decided by podsToCreate, started. */
  async function createPods(run: JobRun): Promise<void> {
    if (run.pods.size === 0) run.planned = planPods(run.job, run.plugins); // new keys after RestartJob
    const fresh: PodRecord[] = podsToCreate(run, ctx.requestOf, admitted.free).map((plan) => ({
      plan,
      phase: 'Pending',
      restarts: 0,
      killing: false,
      ready: false,
    }));
    for (const rec of fresh) {
      run.pods.set(rec.plan.name, rec);
      rec.startedAt = ctx.clock.now();
      armDeadline(run, rec);
    }
    if (fresh.length > 0) await startPods(run, fresh);
  }

  function armDeadline(run: JobRun, rec: PodRecord): void {
    const dueIn = deadlineDueIn(rec.plan, rec.startedAt ?? ctx.clock.now(), ctx.clock.now());
    if (dueIn !== null) ctx.clock.setTimeout(() => void step(run, () => deadlineExceeded(run, rec)), dueIn);
  }

  /** The kubelet's activeDeadlineSeconds: the pod is killed and Failed, and the job's policies see it. */
  async function deadlineExceeded(run: JobRun, rec: PodRecord): Promise<void> {
    if (ctx.closed || !deadlineApplies(run, rec)) return;
    // Forgotten before it is destroyed, so that its containers' ends are not taken for their own.
    const pod = rec.pod;
    rec.pod = undefined;
    await pod?.destroy(ctx.graceMs);
    rec.phase = 'Failed';
    rec.fault = deadlineFault(rec.plan);
    await podEvent(run, rec, 'PodFailed');
  }

  async function startPods(run: JobRun, recs: PodRecord[]): Promise<void> {
    await starter.create(run, recs);
    for (const rec of recs.filter((r) => r.phase === 'Failed')) {
      await podEvent(run, rec, 'PodFailed');
      if (isFinalPhase(run.phase) || run.phase === 'Restarting') return;
    }
    await sync(run);
  }

  /** Never throws: whatever fails on the way becomes the job's fault, and the run ends all the same. */
  async function finish(run: JobRun): Promise<void> {
    ended(run);
    const pods = [...run.pods.values()];
    const destroyed = await Promise.allSettled(pods.map((p) => p.pod?.destroy(ctx.graceMs)));
    for (const [i, result] of destroyed.entries()) {
      if (result.status === 'fulfilled') continue;
      ctx.log?.error({ err: result.reason, jobId: run.id }, 'local pod could not be destroyed');
      run.fault ??= `ucompute could not stop rank ${pods[i]!.plan.rank}: ${(result.reason as Error).message}`;
    }
    for (const p of pods) p.pod = undefined;
    // The job's time ends with its pods: copying its output (or failing to) is not charged.
    const endedAt = ctx.clock.now();
    run.finishedAt = endedAt;
    try {
      await saveOutput(ctx, run);
      await saveRun(ctx, run);
    } catch (err) {
      ctx.log?.error({ err, jobId: run.id }, 'local job state could not be saved at its end');
    }
    reports.report(run, undefined, endedAt);
    run.end();
    await keepEnded(ctx, run.id).catch((err: unknown) =>
      ctx.log?.error({ err, jobId: run.id }, 'local ended job could not be kept'),
    );
    forgetAfterTtl(ctx, run);
    admitted.reschedule();
  }

  async function submit(id: string, job: VolcanoJob, companions: Companion[]): Promise<void> {
    if (ctx.runs.has(id)) return;
    const plugins = await preparePlugins(job);
    const run = newRun({
      id,
      job,
      companions,
      phase: 'Pending',
      retryCount: 0,
      admitted: false,
      submittedAt: ctx.clock.now(),
      plugins,
    });
    await makeJobDir(ctx, id);
    ctx.runs.set(id, run);
    // A gang larger than the machine stays Pending, saying why, as Volcano keeps it (scheduler.ts).
    await saveRun(ctx, run);
    admitted.reschedule();
  }

  return {
    submit,
    terminate,
    step,
    podEvent,
    fail: (run, fault) =>
      step(run, async () => {
        run.fault ??= fault;
        await kill(run, 'TerminateJob');
      }),
    finish,
    adopt(run, rec, pod, exits) {
      starter.watch(run, rec, pod, exits);
      // Its initial delays count from the pod's start, as near as ucompute knows its containers' start.
      startProbes(ctx, run, rec, pod, rec.startedAt ?? ctx.clock.now(), probeOutcomes);
      armDeadline(run, rec);
    },
    admission: admitted,
  };
}
