import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Backend } from '../../jobs/backend.ts';
import { type Clock, systemClock } from '../../model/clock.ts';
import type { JobBuild } from '../../plugins/plugin.ts';
import { isFinalPhase } from '../../volcano/api/phases.ts';
import type { Companion, SshEndpoint, VolcanoJob, VolcanoJobPhase } from '../../volcano/api/types.ts';
import { SSH_PORT } from '../../volcano/names.ts';
import type { VolumeSources } from './containers.ts';
import { type LocalContext, requestCache } from './controller/context.ts';
import { jobController } from './controller/controller.ts';
import { watchDiskUse } from './controller/disk-use.ts';
import type { JobRun } from './controller/job-run.ts';
import { readLogs } from './controller/log-reader.ts';
import { DEFAULT_RETAINED_LOGS_BYTES, forgetJob, saveRun } from './controller/persistence.ts';
import { recoverJobs } from './controller/recovery.ts';
import { jobReports } from './controller/reports.ts';
import { localJobUsage } from './job-usage.ts';
import { DEFAULT_LOGS, type LogRotation } from './pod/context.ts';
import type { Pod, Runtime } from './runtime.ts';
import { type SshPorts, sshForwards } from './ssh-forwards.ts';

export interface LocalBackendOptions {
  runtime: Runtime;
  /** Jobs' state and logs; what a restart of ucompute finds its jobs by. */
  stateDir: string;
  volumes: Omit<VolumeSources, 'companions' | 'claimsRoot'>;
  /** SIGTERM first, SIGKILL after this long (Kubernetes' default is 30 s). */
  gracePeriodMs?: number;
  /** How the runtime rotates containers' output files: what readers and the output copy find. */
  logs?: LogRotation;
  /** Most bytes the ended jobs' kept state and logs hold together. Default 10 GiB. */
  retainedLogsBytes?: number;
  /** Most bytes a job's folder may use while it runs; none by default. */
  diskLimitBytes?: number;
  /** How often a running job's folder is measured. Default 10 s. */
  diskCheckIntervalMs?: number;
  /** The host ports of sshEnabled jobs, and the host name users reach them by. */
  ssh?: { ports: SshPorts; host: string };
  /** What the backend's decisions read the time from and its back-offs wait on. */
  clock?: Clock;
  log?: Logger;
}

/** Without configuration: ports 2200-2299 on loopback. */
const DEFAULT_SSH = { ports: { listen: '127.0.0.1', first: 2200, last: 2299 }, host: '127.0.0.1' };

/**
 * The local backend: runs the Volcano Job the plugins built on this machine, the way Volcano's
 * job controller and scheduler would (research/volcano.md §1–2): pods per task and replica with
 * the env/svc/ssh plugins, gang admission, lifecycle policies, retries and phases; every pod in
 * its own sandbox from the runtime. Its rooms: the decisions (controller/decisions.ts) carried out
 * by the controller (controller/controller.ts), pods started by controller/pod-start.ts, admission,
 * output, logs, disk use and recovery beside them; this file assembles them into a Backend.
 */
export async function localBackend(options: LocalBackendOptions): Promise<LocalBackend> {
  const { runtime, stateDir } = options;
  const clock = options.clock ?? systemClock;
  const jobsDir = join(stateDir, 'jobs');
  // Passable, not listable: an older ucompute's pods bind a job's /etc/hosts from here by path.
  await mkdir(jobsDir, { recursive: true, mode: 0o711 });
  await chmod(jobsDir, 0o711);
  const ctx: LocalContext = {
    runtime,
    clock,
    log: options.log,
    stateDir,
    jobsDir,
    volumes: options.volumes,
    graceMs: options.gracePeriodMs ?? 5000,
    rotation: options.logs ?? DEFAULT_LOGS,
    runs: new Map(),
    endedOrder: [],
    retained: { limitBytes: options.retainedLogsBytes ?? DEFAULT_RETAINED_LOGS_BYTES, bytes: new Map() },
    closed: false,
    reports: jobReports(clock),
    requestOf: requestCache(),
  };
  const sshSettings = options.ssh ?? DEFAULT_SSH;
  const ssh = {
    host: sshSettings.host,
    forwards: sshForwards({
      ...sshSettings.ports,
      connect: async (jobId) => runningPod(jobId, 0).connect(SSH_PORT),
      ...(options.log ? { log: options.log } : {}),
    }),
  };
  const controller = jobController(ctx, (run) => ssh.forwards.close(run.id));
  const stopDiskWatch =
    options.diskLimitBytes === undefined
      ? undefined
      : watchDiskUse(ctx, options.diskLimitBytes, options.diskCheckIntervalMs ?? 10_000, controller.fail);

  /** The job's SSH port, the one it had when there was one (it is in the job's updates). */
  async function openSsh(run: JobRun): Promise<SshEndpoint> {
    const port = await ssh.forwards.open(run.id, run.sshPort);
    if (port !== run.sshPort) {
      run.sshPort = port;
      await saveRun(ctx, run);
    }
    return { host: ssh.host, port };
  }

  function activeRun(jobId: string): JobRun {
    const run = ctx.runs.get(jobId);
    if (!run || isFinalPhase(run.phase)) throw new Error(`job ${jobId} is not running here`);
    return run;
  }

  function runningPod(jobId: string, rank: number): Pod {
    const pod = [...activeRun(jobId).pods.values()].find((p) => p.plan.rank === rank)?.pod;
    if (!pod) throw new Error(`rank ${rank} of job ${jobId} is not running`);
    return pod;
  }

  await recoverJobs(ctx, controller, openSsh);

  const submitVolcanoJob = (id: string, job: VolcanoJob, companions: Companion[] = []) =>
    controller.submit(id, job, companions);

  return {
    name: 'local',

    // One machine: every replica of a job runs on it, beside one another.
    machines: () => {
      const { cpuMillis, memoryBytes } = runtime.capacity;
      return {
        total: { cpu: cpuMillis / 1000, memory: memoryBytes },
        largest: { cpuMillis, memoryBytes, holdsEveryReplica: true },
      };
    },

    submit: (jobId: string, build: JobBuild) => submitVolcanoJob(jobId, build.volcanoJob, build.companions),

    submitVolcanoJob,

    async cancel(jobId) {
      const run = ctx.runs.get(jobId);
      if (run) await controller.terminate(run);
    },

    async suspend(jobId) {
      const run = ctx.runs.get(jobId);
      if (!run) return;
      // Its end is not the job's end: nothing it says reaches the service, and once its pods are
      // gone (their output saved to the job's folder) the run is forgotten, so a submit starts it anew.
      await ctx.reports.silenced(jobId, async () => {
        await controller.terminate(run);
        await run.ended;
        await forgetJob(ctx, jobId);
      });
    },

    // ucompute's own monitor enforces deadlines; the scheduler reads them from the build.
    async extend() {},

    async knownJobs() {
      return new Set(ctx.runs.keys());
    },

    onEvent: ctx.reports.onEvent,

    async *logs(jobId, { follow, signal }) {
      const run = ctx.runs.get(jobId);
      if (run) yield* readLogs(ctx, run, follow, signal);
    },

    // A job it ran and no longer has went with its kept folder: past the retention's bounds or its
    // ttlSecondsAfterFinished (controller/persistence.ts, finished-ttl.ts).
    logsRemoved(jobId) {
      if (ctx.runs.has(jobId)) return undefined;
      return 'removed with its kept folder (local.retainedLogsBytes, 10,000 jobs or ttlSecondsAfterFinished)';
    },

    async shell(jobId, rank, o) {
      return runningPod(jobId, rank).shell(o);
    },

    async connect(jobId, rank, port) {
      return runningPod(jobId, rank).connect(port);
    },

    usage: localJobUsage(ctx.runs),

    async sshEndpoint(jobId) {
      return openSsh(activeRun(jobId));
    },

    phaseOf(jobId) {
      return ctx.runs.get(jobId)?.phase;
    },

    onPhase: ctx.reports.onPhase,

    async close() {
      ctx.closed = true;
      ssh.forwards.closeAll();
      stopDiskWatch?.();
      await Promise.all([...ctx.runs.values()].map((r) => r.chain));
      await runtime.close();
    },
  };
}

/** The Backend, plus what `vcjob run` and the tests need: Volcano Jobs as they are, and their phases. */
export interface LocalBackend extends Backend {
  /** Runs a Volcano Job manifest as it is, under this id. */
  submitVolcanoJob(id: string, job: VolcanoJob, companions?: Companion[]): Promise<void>;
  phaseOf(jobId: string): VolcanoJobPhase | undefined;
  /** Called with every phase a job enters. */
  onPhase(listener: (jobId: string, phase: VolcanoJobPhase) => void): void;
}
