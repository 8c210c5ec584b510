import { isFinalPhase } from '../../../volcano/api/phases.ts';
import type { Pod } from '../runtime.ts';
import type { LocalContext } from './context.ts';
import type { JobRun, PodRecord } from './job-run.ts';
import { runProbe } from './probe-run.ts';
import {
  type ContainerProbeState,
  containerAfter,
  type ProbeVerdict,
  type ProbeWorker,
  podProbes,
  podReady,
  probeFailure,
  probeResult,
  probesNow,
} from './probes.ts';

/**
 * The kubelet's probe workers for one running pod, on the controller's clock: each probe runs at
 * once and then every periodSeconds (a probe still running when the next is due skips it), while
 * its pod is the record's and alive. The decisions are probes.ts's; what they lead to is the
 * controller's (`ProbeOutcomes`), as steps of the job.
 */
export interface ProbeOutcomes {
  step(run: JobRun, what: () => Promise<void>): Promise<void>;
  /** The pod's Ready condition changed: `rec.ready` says how. */
  readiness(run: JobRun, rec: PodRecord): Promise<void>;
  /** A liveness or startup probe failed past its threshold: the container is killed (after `graceMs`) and restarted per restartPolicy. */
  probeKilled(run: JobRun, rec: PodRecord, pod: Pod, fault: string, graceMs: number): Promise<void>;
}

/**
 * Starts the pod's probe workers; `since` is when its containers started (the initial delays count
 * from it). `rec.ready` is set to the pod's first Ready condition.
 */
export function startProbes(
  ctx: LocalContext,
  run: JobRun,
  rec: PodRecord,
  pod: Pod,
  since: number,
  outcomes: ProbeOutcomes,
): void {
  const { workers, containers } = podProbes(rec.plan);
  rec.ready = podReady(containers);
  const live = () => rec.pod === pod && !rec.killing && !ctx.closed && !isFinalPhase(run.phase);

  async function apply(worker: ProbeWorker, verdict: ProbeVerdict, why: string): Promise<void> {
    if (!live()) return;
    if (verdict.kind === 'kill') {
      const grace = worker.probe.terminationGracePeriodSeconds;
      await outcomes.probeKilled(
        run,
        rec,
        pod,
        probeFailure(rec.plan, worker, why),
        grace ? grace * 1000 : ctx.graceMs,
      );
      return;
    }
    const name = worker.container.name;
    containers.set(
      name,
      containerAfter(containers.get(name) as ContainerProbeState, worker.container, verdict),
    );
    if (verdict.kind === 'ready' && !verdict.ready)
      ctx.reports.notify(run, probeFailure(rec.plan, worker, why));
    const ready = podReady(containers);
    if (ready === rec.ready) return;
    rec.ready = ready;
    await outcomes.readiness(run, rec);
  }

  function follow(first: ProbeWorker): void {
    let worker = first;
    const tick = async (at: number): Promise<void> => {
      if (!live()) return;
      const state = containers.get(worker.container.name) as ContainerProbeState;
      if (probesNow(worker, state, at - since)) {
        const outcome = await runProbe(ctx.clock, pod, worker);
        if (!live()) return;
        const result = probeResult(worker, outcome.ok);
        worker = result.worker;
        if (result.verdict.kind !== 'none') {
          const verdict = result.verdict;
          await outcomes.step(run, () => apply(worker, verdict, outcome.why));
          // A killed container's workers end with its pod; the restarted pod has new ones.
          if (verdict.kind === 'kill') return;
        }
      }
      const period = worker.timing.periodMs;
      const now = ctx.clock.now();
      const next = at + period * Math.max(1, Math.ceil((now - at) / period));
      ctx.clock.setTimeout(() => void tick(next).catch(failed), next - now);
    };
    void tick(ctx.clock.now()).catch(failed);
  }

  const failed = (err: unknown) =>
    ctx.log?.error({ err, jobId: run.id, pod: pod.name }, 'probe worker failed');
  for (const worker of workers) follow(worker);
}
