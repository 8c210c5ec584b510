import { join } from 'node:path';
import type { Container } from '../../../volcano/api/types.ts';
import { containerSpec, podLimits, podShmBytes } from '../containers.ts';
import type { ContainerExit, Pod } from '../runtime.ts';
import { fileTail } from '../sandbox-status.ts';
import type { LocalContext } from './context.ts';
import { initContainerFailure } from './failure-reasons.ts';
import { connectNetwork, writeHosts } from './job-network.ts';
import { type JobRun, logFile, type PodRecord, pidsLimit, runtimePodName } from './job-run.ts';
import { makeJobDir } from './persistence.ts';

/** How a pod's start ends, told to the controller; each is called as a step of the job. */
export interface PodOutcomes {
  /** Runs a step of a job after the ones before it. */
  step(run: JobRun, what: () => Promise<void>): Promise<void>;
  /** Every main container of the pod runs (the record is Running). */
  running(run: JobRun, rec: PodRecord): Promise<void>;
  /** The pod could not start; its record is Failed and says why. */
  failed(run: JobRun, rec: PodRecord): Promise<void>;
  /** The pod's main containers have all ended: the first one's exit is the pod's. */
  exited(run: JobRun, rec: PodRecord, exit: ContainerExit): Promise<void>;
}

export interface PodStarter {
  /**
   * Creates the pods in the runtime with their addresses and network, then starts their containers
   * in the background; a pod the runtime could not create is left Failed, saying why.
   */
  create(run: JobRun, recs: readonly PodRecord[]): Promise<void>;
  /** Tells `exited` when the pod's main containers have all ended (for a recovered pod too). */
  watch(run: JobRun, rec: PodRecord, pod: Pod, exits: Promise<ContainerExit>[]): void;
}

/** A pod that cannot run: Failed with the platform's reason, and 255 unless a container said otherwise. */
export function failToStart(rec: PodRecord, why: string, exit?: ContainerExit): void {
  rec.fault = why;
  rec.phase = 'Failed';
  rec.exit = exit ?? { exitCode: 255, signal: null, oomKilled: false };
}

export function podStarter(ctx: LocalContext, outcomes: PodOutcomes): PodStarter {
  async function create(run: JobRun, recs: readonly PodRecord[]): Promise<void> {
    await makeJobDir(ctx, run.id);
    await Promise.all(
      recs.map(async (rec) => {
        try {
          rec.pod = await ctx.runtime.createPod({
            name: runtimePodName(run, rec.plan),
            jobId: run.id,
            owner: run.job.metadata.namespace ?? 'default',
            hostname: rec.plan.hostname,
            limits: { ...podLimits(rec.plan), pids: pidsLimit(run.job) },
            shmBytes: podShmBytes(rec.plan),
          });
        } catch (err) {
          failToStart(rec, `Rank ${rec.plan.rank} could not be created: ${(err as Error).message}`);
        }
      }),
    );
    await writeHosts(ctx, run);
    await connectNetwork(ctx, run);
    for (const rec of recs) if (rec.pod) void runContainers(run, rec, rec.pod);
  }

  /**
   * Init containers one after the other, then the main ones; outside the job's steps, so that a
   * cancel never waits behind a slow init container. Each outcome comes back as a step.
   */
  async function runContainers(run: JobRun, rec: PodRecord, pod: Pod): Promise<void> {
    const spec = rec.plan.task.template.spec;
    const ctxOf = {
      job: run.job,
      plan: rec.plan,
      pod,
      sources: { ...ctx.volumes, claimsRoot: join(ctx.stateDir, 'claims'), companions: run.companions },
      hostsFile: pod.hostsFile,
      notify: (status: string) => ctx.reports.notify(run, status),
    };
    const specOf = (c: Container, at: string) =>
      containerSpec(
        {
          ...ctxOf,
          stdout: logFile(ctx.jobsDir, run.id, rec.plan.rank, c.name, 'out'),
          stderr: logFile(ctx.jobsDir, run.id, rec.plan.rank, c.name, 'err'),
        },
        c,
        at,
      );
    const current = () => rec.pod === pod && !rec.killing;
    const failed = (why: string, exit?: ContainerExit) =>
      outcomes.step(run, async () => {
        if (!current()) return;
        failToStart(rec, why, exit);
        await pod.destroy(0);
        rec.pod = undefined;
        await outcomes.failed(run, rec);
      });
    try {
      for (const [i, init] of (spec.initContainers ?? []).entries()) {
        const started = await pod.start(await specOf(init, `spec.initContainers[${i}]`));
        const exit = await started.exited;
        if (!current()) return;
        if (exit.exitCode !== 0 || exit.oomKilled) {
          const stderr = await fileTail(logFile(ctx.jobsDir, run.id, rec.plan.rank, init.name, 'err'));
          await failed(initContainerFailure(rec.plan.rank, init.name, exit, stderr), exit);
          return;
        }
      }
      const started = await Promise.all(
        spec.containers.map(async (c, i) => pod.start(await specOf(c, `spec.containers[${i}]`))),
      );
      await outcomes.step(run, async () => {
        if (!current()) return;
        rec.phase = 'Running';
        watch(
          run,
          rec,
          pod,
          started.map((c) => c.exited),
        );
        await outcomes.running(run, rec);
      });
    } catch (err) {
      if (current()) await failed(`Rank ${rec.plan.rank} could not start: ${(err as Error).message}`);
    }
  }

  /** When the pod's main containers have all ended, the first one's exit is the pod's (Volcano's rule). */
  function watch(run: JobRun, rec: PodRecord, pod: Pod, exits: Promise<ContainerExit>[]): void {
    void Promise.all(exits).then((all) => {
      // Replaced or killed meanwhile; or this backend is closed, and the next ucompute takes over.
      if (rec.pod !== pod || ctx.closed) return;
      const oom = all.find((e) => e.oomKilled);
      const first = all[0]!;
      const exit = oom ? { ...first, oomKilled: true } : first;
      void outcomes.step(run, () => outcomes.exited(run, rec, exit));
    });
  }

  return { create, watch };
}
