import {
  chmod,
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from 'pino';
import type { Backend, BackendEvent, LogChunk } from '../../jobs/backend.ts';
import type { JobBuild } from '../../plugins/plugin.ts';
import { diskUse, openFolder, writeNewFile } from '../../storage/folders.ts';
import {
  DEFAULT_MAX_RETRY,
  dependenciesMet,
  gangPodNames,
  isFinalPhase,
  killFor,
  type PodCounts,
  type PodEvent,
  type PodPhase,
  policyAction,
  syncPhase,
  totalReplicas,
} from '../../volcano/job-phase.ts';
import { type PluginState, type PodPlan, planPods, preparePlugins } from '../../volcano/job-plugins.ts';
import {
  FAIR_SHARE_WEIGHT_ANNOTATION,
  MAX_TIME_ANNOTATION,
  OUTPUT_FOLDER_ANNOTATION,
  PEERS_ANNOTATION,
  PIDS_LIMIT_ANNOTATION,
} from '../../volcano/labels.ts';
import { logFileName, SSH_PORT, volcanoJobName } from '../../volcano/names.ts';
import type {
  Companion,
  Container,
  SshEndpoint,
  VolcanoAction,
  VolcanoJob,
  VolcanoJobPhase,
} from '../../volcano/types.ts';
import { containerSpec, podLimits, podRequest, podShmBytes, type VolumeSources } from './containers.ts';
import { LOG_CHUNK_BYTES, type LogCursor, logParts, readLogChunk } from './log-files.ts';
import { DEFAULT_LOGS, type LogRotation } from './pod.ts';
import type { ContainerExit, Pod, Runtime } from './runtime.ts';
import {
  describe,
  fits,
  minus,
  NO_RESOURCES,
  plus,
  queueStatus,
  type Resources,
  schedule,
} from './scheduler.ts';
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
  /** Most bytes a job's folder may use while it runs; none by default. */
  diskLimitBytes?: number;
  /** How often a running job's folder is measured. Default 10 s. */
  diskCheckIntervalMs?: number;
  /** The host ports of sshEnabled jobs, and the host name users reach them by. */
  ssh?: { ports: SshPorts; host: string };
  now?: () => number;
  log?: Logger;
}

/** Without configuration: ports 2200-2299 on loopback. */
const DEFAULT_SSH = { ports: { listen: '127.0.0.1', first: 2200, last: 2299 }, host: '127.0.0.1' };

/** Ended jobs whose state and logs are kept; older ones are removed. */
const ENDED_KEPT = 10_000;
const LOG_POLL_MS = 100;
/** A container that keeps failing past its task's maxRetry restarts after this, doubling up to the cap (the kubelet's CrashLoopBackOff). */
const CRASH_BACKOFF_MS = 10_000;
const CRASH_BACKOFF_MAX_MS = 300_000;

interface PodRecord {
  plan: PodPlan;
  phase: PodPhase;
  pod?: Pod;
  exit?: ContainerExit;
  /** Why the platform could not run it, when that is what ended it. */
  fault?: string;
  restarts: number;
  /** Containers restarted in place (restartPolicy OnFailure/Always) count here. */
  killing: boolean;
}

/** What survives a restart of ucompute, in <stateDir>/jobs/<id>/state.json. */
interface SavedJob {
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
  /** The host port of its SSH endpoint, opened again after a restart of ucompute. */
  sshPort?: number;
  pods: { name: string; phase: PodPhase; exit?: ContainerExit; fault?: string; restarts: number }[];
}

interface JobRun extends Omit<SavedJob, 'pods'> {
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

/**
 * The local backend: runs the Volcano Job the plugins built on this machine, the way Volcano's
 * job controller and scheduler would (research/volcano.md §1–2): pods per task and replica with
 * the env/svc/ssh plugins, gang admission, lifecycle policies, retries and phases; every pod in
 * its own sandbox from the runtime. Phases become job states as SPEC §1 says: the application's
 * exit codes are reported per rank on SUCCESS; OOM-kills and platform faults are FAILURE.
 */
export async function localBackend(options: LocalBackendOptions): Promise<LocalBackend> {
  const { runtime, stateDir } = options;
  const now = options.now ?? Date.now;
  const grace = options.gracePeriodMs ?? 5000;
  const jobsDir = join(stateDir, 'jobs');
  // Passable, not listable: a job's /etc/hosts is bound from here by path as containers' host users.
  await mkdir(jobsDir, { recursive: true, mode: 0o711 });
  await chmod(jobsDir, 0o711);
  const runs = new Map<string, JobRun>();
  const endedOrder: string[] = [];
  const sshSettings = options.ssh ?? DEFAULT_SSH;
  const ssh = {
    host: sshSettings.host,
    forwards: sshForwards({
      ...sshSettings.ports,
      connect: async (jobId) => runningPod(jobId, 0).connect(SSH_PORT),
      ...(options.log ? { log: options.log } : {}),
    }),
  };
  const listeners: ((e: BackendEvent) => void)[] = [];
  const pending: BackendEvent[] = [];
  let closed = false;

  /** Jobs being suspended: their runs end, but the jobs do not. */
  const silenced = new Set<string>();
  const emit = (e: BackendEvent) => {
    if (silenced.has(e.jobId)) return;
    if (listeners.length === 0) pending.push(e);
    for (const l of listeners) l(e);
  };
  const jobDir = (id: string) => join(jobsDir, id);
  const rotation = options.logs ?? DEFAULT_LOGS;
  /** One container's stream: container names are DNS labels, so no two containers share a file. */
  const logFile = (id: string, rank: number, container: string, stream: 'out' | 'err') =>
    join(jobDir(id), 'logs', `${rank}.${container}.${stream}`);
  /** The containers of a rank, in the order they run: init containers, then the main ones. */
  const rankContainers = (run: JobRun, rank: number): string[] => {
    const spec = run.planned.find((p) => p.rank === rank)?.task.template.spec;
    return spec ? [...(spec.initContainers ?? []), ...spec.containers].map((c) => c.name) : [];
  };

  // ---- persistence ----------------------------------------------------------------------------

  const phaseListeners: ((jobId: string, phase: VolcanoJobPhase) => void)[] = [];

  /** Writes the job's state (every change passes here, so phase changes are told from here too). */
  async function save(run: JobRun): Promise<void> {
    if (run.phase !== run.toldPhase) {
      run.toldPhase = run.phase;
      for (const l of phaseListeners) l(run.id, run.phase);
    }
    const saved: SavedJob = {
      id: run.id,
      job: run.job,
      companions: run.companions,
      phase: run.phase,
      retryCount: run.retryCount,
      admitted: run.admitted,
      submittedAt: run.submittedAt,
      plugins: run.plugins,
      ...(run.fault ? { fault: run.fault } : {}),
      ...(run.sshPort !== undefined ? { sshPort: run.sshPort } : {}),
      pods: [...run.pods.values()].map((p) => ({
        name: p.plan.name,
        phase: p.phase,
        restarts: p.restarts,
        ...(p.exit ? { exit: p.exit } : {}),
        ...(p.fault ? { fault: p.fault } : {}),
      })),
    };
    const file = join(jobDir(run.id), 'state.json');
    await writeFile(`${file}.tmp`, JSON.stringify(saved));
    await rename(`${file}.tmp`, file);
  }

  function newRun(saved: Omit<SavedJob, 'pods'>): JobRun {
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

  /** Runs a step of a job after the ones before it; a failing step fails the job, said clearly. */
  function step(run: JobRun, what: () => Promise<void>): Promise<void> {
    run.chain = run.chain.then(what).catch(async (err: unknown) => {
      options.log?.error({ err, jobId: run.id }, 'local job step failed');
      run.fault ??= `ucompute could not run the job: ${(err as Error).message}`;
      await kill(run, 'TerminateJob');
    });
    return run.chain;
  }

  // ---- reporting --------------------------------------------------------------------------------

  /** Tells the job's state once per change; `at` is when it happened (the end precedes saving its output). */
  function report(run: JobRun, waiting?: { position: number; reason: string }, at = now()): void {
    const event = eventOf(run, waiting);
    if (!event) return;
    const key = `${event.state}:${event.status}`;
    if (key === run.said) return;
    run.said = key;
    run.saidState = event.state;
    emit({ ...event, jobId: run.id, at });
  }

  /** A line in the job's updates that does not change its state; each said once per job. */
  function notify(run: JobRun, status: string): void {
    if (run.notices.has(status)) return;
    run.notices.add(status);
    // Containers start once the job is admitted, which may be before "The job is starting" is said.
    const state = run.saidState ?? 'IN_QUEUE';
    run.said = `${state}:${status}`;
    emit({ state, status, jobId: run.id, at: now() });
  }

  function eventOf(
    run: JobRun,
    waiting?: { position: number; reason: string },
  ): Omit<BackendEvent, 'jobId' | 'at'> | undefined {
    const ranks = [...run.pods.values()];
    switch (run.phase) {
      case 'Pending':
        if (run.startedAt !== null)
          return { state: 'RUNNING', status: 'The job is starting its replicas again' };
        if (waiting) return { state: 'IN_QUEUE', status: queueStatus(waiting) };
        return run.admitted ? { state: 'IN_QUEUE', status: 'The job is starting' } : undefined;
      case 'Running':
        return { state: 'RUNNING', status: 'The job is running' };
      case 'Restarting':
        return {
          state: 'RUNNING',
          status: `The job is restarting (retry ${run.retryCount} of ${run.job.spec.maxRetry ?? DEFAULT_MAX_RETRY})`,
        };
      case 'Aborting':
      case 'Completing':
      case 'Terminating':
        return undefined;
      default: {
        const exitCodes = Object.fromEntries(
          ranks.flatMap((p) => (p.exit ? [[String(p.plan.rank), p.exit.exitCode]] : [])),
        );
        const oom = ranks.find((p) => p.exit?.oomKilled);
        const fault = run.fault ?? ranks.find((p) => p.fault)?.fault;
        if (oom) {
          return {
            state: 'FAILURE',
            status: `Rank ${oom.plan.rank} exceeded its memory limit (OOM-killed)`,
            exitCodes,
          };
        }
        if (fault) return { state: 'FAILURE', status: fault, exitCodes };
        if (ranks.length === 0 && run.phase !== 'Completed') {
          return { state: 'SUCCESS', status: `The job ended (${run.phase}) before any replica started` };
        }
        if (run.phase === 'Aborted') {
          return { state: 'FAILURE', status: 'The job was aborted: a replica was lost', exitCodes };
        }
        const failed = ranks.filter((p) => p.exit && p.exit.exitCode !== 0);
        const status =
          failed.length === 0
            ? `The job finished (exit code 0 on every rank)`
            : `The job ended (${run.phase}): ${failed
                .slice(0, 5)
                .map((p) => `rank ${p.plan.rank} exited with code ${p.exit!.exitCode}`)
                .join(', ')}${failed.length > 5 ? ', …' : ''}`;
        return { state: 'SUCCESS', status, exitCodes };
      }
    }
  }

  // ---- the job controller -------------------------------------------------------------------

  function counts(run: JobRun): PodCounts {
    const c: PodCounts = {
      pending: 0,
      running: 0,
      succeeded: 0,
      failed: 0,
      terminating: 0,
      succeededByTask: {},
    };
    for (const p of run.pods.values()) {
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

  /** SyncJob: phase from the counts, pods created when the job may have them, the end handled. */
  async function sync(run: JobRun): Promise<void> {
    for (let i = 0; i < 4; i++) {
      const next = syncPhase(run.job, run.phase, counts(run), run.retryCount);
      if (next === run.phase) break;
      run.phase = next;
      if (next === 'Running') run.startedAt ??= now();
    }
    if (isFinalPhase(run.phase)) {
      await finish(run);
      return;
    }
    // Pods are made while the job starts and runs: dependent tasks and elastic replicas come later.
    if (run.admitted && (run.phase === 'Pending' || run.phase === 'Running')) await createPods(run);
    await save(run);
    report(run);
  }

  /** Ends the run: a queued one at once, an admitted one through TerminateJob. */
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
    if (isFinalPhase(run.phase)) return;
    const effect = killFor(action);
    if (effect.retry) run.retryCount++;
    // The last retry keeps finished pods, as Volcano does, so their exit codes and logs survive.
    const soft = effect.soft || run.retryCount >= (run.job.spec.maxRetry ?? DEFAULT_MAX_RETRY);
    const victims = [...run.pods.values()].filter((p) => {
      if (action === 'RestartPod') return p === target;
      if (action === 'RestartTask') return p.plan.task.name === target?.plan.task.name;
      return soft ? p.phase === 'Pending' || p.phase === 'Running' : true;
    });
    run.phase = effect.phase;
    if (action === 'RestartJob') run.plugins = await preparePlugins(run.job); // OnJobDelete then OnJobAdd
    for (const v of victims) v.killing = true;
    await save(run);
    report(run);
    await Promise.all(victims.map((v) => v.pod?.destroy(grace)));
    for (const v of victims) run.pods.delete(v.plan.name); // deleted pods are gone, as in Kubernetes
    await sync(run);
  }

  /** A pod event through the job's policies; no matching policy means SyncJob. */
  async function podEvent(run: JobRun, rec: PodRecord, event: PodEvent): Promise<void> {
    const action = policyAction(run.job, rec.plan.task, event, rec.exit?.exitCode);
    if (action) await kill(run, action, rec);
    else await sync(run);
  }

  async function containerExited(run: JobRun, rec: PodRecord, exit: ContainerExit): Promise<void> {
    if (rec.killing || isFinalPhase(run.phase) || !run.pods.has(rec.plan.name)) return;
    const outside = killedFromOutside(rec.plan.rank, exit);
    if (outside) {
      // Not the application's outcome: no in-place restart hides it, the job fails saying so.
      rec.exit = exit;
      rec.fault = outside;
      rec.phase = 'Failed';
      await rec.pod?.destroy(0);
      rec.pod = undefined;
      await podEvent(run, rec, 'PodFailed');
      return;
    }
    const restartPolicy = rec.plan.task.template.spec.restartPolicy ?? 'Always';
    const restart =
      !exit.oomKilled &&
      (restartPolicy === 'Always' || (restartPolicy === 'OnFailure' && exit.exitCode !== 0));
    const task = rec.plan.task;
    if (restart && run.phase === 'Running') {
      rec.restarts++;
      const taskRestarts = [...run.pods.values()]
        .filter((p) => p.plan.task.name === task.name)
        .reduce((n, p) => n + p.restarts, 0);
      const maxRetry = task.maxRetry ?? DEFAULT_MAX_RETRY;
      const overRetries = maxRetry !== -1 ? taskRestarts - maxRetry : -1;
      if (overRetries >= 0) {
        const action = policyAction(run.job, task, 'TaskFailed', exit.exitCode);
        if (action) {
          rec.exit = exit;
          rec.phase = 'Failed';
          await rec.pod?.destroy(0);
          rec.pod = undefined;
          await kill(run, action, rec);
          return;
        }
        // No policy for TaskFailed: the controller does nothing and the job stays Running while
        // the kubelet keeps restarting the container, with back-off.
      }
      // The pod stays Running while its container starts again, as a kubelet restart looks.
      await rec.pod?.destroy(0);
      rec.pod = undefined;
      if (overRetries <= 0) {
        await startPods(run, [rec]);
        return;
      }
      const delay = Math.min(CRASH_BACKOFF_MS * 2 ** (overRetries - 1), CRASH_BACKOFF_MAX_MS);
      setTimeout(() => {
        void step(run, async () => {
          const current = run.pods.get(rec.plan.name) === rec && !rec.killing && !rec.pod;
          if (closed || !current || run.phase !== 'Running') return;
          await startPods(run, [rec]);
        });
      }, delay).unref();
      return;
    }
    rec.exit = exit;
    rec.phase = exit.exitCode === 0 && !exit.oomKilled ? 'Succeeded' : 'Failed';
    await rec.pod?.destroy(0); // a finished pod's leftovers (daemons it started) end with it
    rec.pod = undefined;
    if (rec.phase === 'Failed') {
      await podEvent(run, rec, 'PodFailed');
      return;
    }
    const taskDone = [...run.pods.values()].filter(
      (p) => p.plan.task.name === task.name && p.phase === 'Succeeded',
    ).length;
    if (taskDone === task.replicas) await podEvent(run, rec, 'TaskCompleted');
    else await sync(run);
    reschedule(); // what the pod held is free for waiting pods and jobs
  }

  /** Each planned pod's request, parsed once: the scheduler asks for them on every pass. */
  const requests = new WeakMap<PodPlan, Resources>();
  const requestOf = (plan: PodPlan): Resources => {
    const known = requests.get(plan);
    if (known) return known;
    const request = podRequest(plan);
    requests.set(plan, request);
    return request;
  };

  /** What a job holds of the machine: its live pods, and the gang's pods not made yet. */
  function held(run: JobRun): Resources {
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

  function freeCapacity(): Resources {
    let free = runtime.capacity;
    for (const r of runs.values()) if (r.admitted && !isFinalPhase(r.phase)) free = minus(free, held(r));
    return free;
  }

  /**
   * SyncJob's pod creation: the pods the job lacks, once the tasks they depend on run; the gang's
   * were admitted with the job, the others (an elastic job's) only where they fit the machine now.
   */
  async function createPods(run: JobRun): Promise<void> {
    if (run.pods.size === 0) run.planned = planPods(run.job, run.plugins); // new keys after RestartJob
    const started: Record<string, number> = {};
    for (const p of run.pods.values()) {
      if (!p.killing && (p.phase === 'Running' || p.phase === 'Succeeded')) {
        started[p.plan.task.name] = (started[p.plan.task.name] ?? 0) + 1;
      }
    }
    let free: Resources | undefined;
    const fresh: PodRecord[] = [];
    for (const plan of run.planned) {
      if (run.pods.has(plan.name) || !dependenciesMet(run.job, plan.task, started)) continue;
      if (!run.gang.has(plan.name)) {
        free ??= freeCapacity();
        const need = requestOf(plan);
        if (!fits(need, free)) continue;
        free = minus(free, need);
      }
      fresh.push({ plan, phase: 'Pending', restarts: 0, killing: false });
    }
    for (const rec of fresh) run.pods.set(rec.plan.name, rec);
    if (fresh.length > 0) await startPods(run, fresh);
  }

  /** An admitted job with a replica beyond its gang that waits for room and would fit in `free`. */
  const mayGrow = (run: JobRun, free: Resources) =>
    run.admitted &&
    (run.phase === 'Pending' || run.phase === 'Running') &&
    run.pods.size > 0 &&
    run.planned.some((p) => !run.pods.has(p.name) && !run.gang.has(p.name) && fits(requestOf(p), free));

  /** Creates pods in the runtime with their addresses and network, then starts their containers. */
  async function startPods(run: JobRun, recs: PodRecord[]): Promise<void> {
    await mkdir(join(jobDir(run.id), 'logs'), { recursive: true });
    await Promise.all(
      recs.map(async (rec) => {
        try {
          rec.pod = await runtime.createPod({
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
    await writeHosts(run);
    await connectNetwork(run);
    for (const rec of recs) if (rec.pod) void runContainers(run, rec, rec.pod);
    for (const rec of recs.filter((r) => r.phase === 'Failed')) {
      await podEvent(run, rec, 'PodFailed');
      if (isFinalPhase(run.phase) || run.phase === 'Restarting') return;
    }
    await sync(run);
  }

  function failToStart(rec: PodRecord, why: string, exit?: ContainerExit): void {
    rec.fault = why;
    rec.phase = 'Failed';
    rec.exit = exit ?? { exitCode: 255, signal: null, oomKilled: false };
  }

  /**
   * Init containers one after the other, then the main ones; outside the job's steps, so that a
   * cancel never waits behind a slow init container. Each outcome comes back as a step.
   */
  async function runContainers(run: JobRun, rec: PodRecord, pod: Pod): Promise<void> {
    const spec = rec.plan.task.template.spec;
    const ctx = {
      job: run.job,
      plan: rec.plan,
      pod,
      sources: { ...options.volumes, claimsRoot: join(stateDir, 'claims'), companions: run.companions },
      hostsFile: join(jobDir(run.id), 'hosts'),
      notify: (status: string) => notify(run, status),
    };
    const specOf = (c: Container, at: string) =>
      containerSpec(
        {
          ...ctx,
          stdout: logFile(run.id, rec.plan.rank, c.name, 'out'),
          stderr: logFile(run.id, rec.plan.rank, c.name, 'err'),
        },
        c,
        at,
      );
    const current = () => rec.pod === pod && !rec.killing;
    const failed = (why: string, exit?: ContainerExit) =>
      step(run, async () => {
        if (!current()) return;
        failToStart(rec, why, exit);
        await pod.destroy(0);
        rec.pod = undefined;
        await podEvent(run, rec, 'PodFailed');
      });
    try {
      for (const [i, init] of (spec.initContainers ?? []).entries()) {
        const started = await pod.start(await specOf(init, `spec.initContainers[${i}]`));
        const exit = await started.exited;
        if (!current()) return;
        if (exit.exitCode !== 0 || exit.oomKilled) {
          const how = exit.sandboxFailure
            ? `could not run: its sandbox failed: ${exit.sandboxFailure}`
            : exit.oomKilled
              ? 'exceeded its memory limit'
              : `exited with code ${exit.exitCode}`;
          await failed(`Rank ${rec.plan.rank} failed to start: init container ${init.name} ${how}`, exit);
          return;
        }
      }
      const started = await Promise.all(
        spec.containers.map(async (c, i) => pod.start(await specOf(c, `spec.containers[${i}]`))),
      );
      await step(run, async () => {
        if (!current()) return;
        rec.phase = 'Running';
        watch(
          run,
          rec,
          pod,
          started.map((c) => c.exited),
        );
        await sync(run);
      });
    } catch (err) {
      if (current()) await failed(`Rank ${rec.plan.rank} could not start: ${(err as Error).message}`);
    }
  }

  /** When the pod's main containers have all ended, the first one's exit is the pod's (Volcano's rule). */
  function watch(run: JobRun, rec: PodRecord, pod: Pod, exits: Promise<ContainerExit>[]): void {
    void Promise.all(exits).then((all) => {
      // Replaced or killed meanwhile; or this backend is closed, and the next ucompute takes over.
      if (rec.pod !== pod || closed) return;
      const oom = all.find((e) => e.oomKilled);
      const first = all[0]!;
      const exit = oom ? { ...first, oomKilled: true } : first;
      void step(run, () => containerExited(run, rec, exit));
    });
  }

  /** /etc/hosts of every pod of the job: its pods as `<pod>` and `<pod>.<job>`, its peers by hostname. */
  async function writeHosts(run: JobRun): Promise<void> {
    const lines = ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback'];
    for (const p of run.pods.values()) {
      if (p.pod) lines.push(`${p.pod.ip}\t${p.plan.hostname}.${p.plan.subdomain} ${p.plan.hostname}`);
    }
    for (const alias of run.job.spec.tasks[0]?.template.spec.hostAliases ?? []) {
      lines.push(`${alias.ip}\t${alias.hostnames.join(' ')}`);
    }
    for (const peer of peersOf(run)) {
      const target = runs.get(peer.jobId);
      const first = target && [...target.pods.values()].find((p) => p.pod);
      if (first?.pod) lines.push(`${first.pod.ip}\t${peer.hostname}`);
    }
    // Written in place: every pod binds this very file, so a restarted replica's address reaches all.
    const file = await open(join(jobDir(run.id), 'hosts'), 'w');
    try {
      await file.writeFile(`${lines.join('\n')}\n`);
    } finally {
      await file.close();
    }
  }

  function peersOf(run: JobRun): { hostname: string; jobId: string }[] {
    const text = run.job.metadata.annotations?.[PEERS_ANNOTATION];
    return text ? (JSON.parse(text) as { hostname: string; jobId: string }[]) : [];
  }

  /** ConnectToJob, enforced: a job's pods reach each other and their peers' pods, both ways. */
  async function connectNetwork(run: JobRun): Promise<void> {
    const related = new Set<JobRun>([run]);
    for (const peer of peersOf(run)) {
      const target = runs.get(peer.jobId);
      if (target) related.add(target);
    }
    for (const other of runs.values()) {
      if (peersOf(other).some((p) => p.jobId === run.id)) related.add(other);
    }
    for (const r of related) {
      const addresses = new Set<string>();
      for (const member of [r, ...(r === run ? related : [run])]) {
        for (const p of member.pods.values()) if (p.pod) addresses.add(p.pod.ip);
      }
      await Promise.all([...r.pods.values()].map((p) => p.pod?.allowPeers([...addresses])));
    }
  }

  async function finish(run: JobRun): Promise<void> {
    ssh.forwards.close(run.id);
    await Promise.all([...run.pods.values()].map((p) => p.pod?.destroy(grace)));
    for (const p of run.pods.values()) p.pod = undefined;
    // The job's time ends with its pods: copying its output (or failing to) is not charged.
    const endedAt = now();
    await saveOutput(run);
    await save(run);
    report(run, undefined, endedAt);
    run.end();
    endedOrder.push(run.id);
    while (endedOrder.length > ENDED_KEPT) {
      const oldest = endedOrder.shift()!;
      runs.delete(oldest);
      await rm(jobDir(oldest), { recursive: true, force: true });
    }
    reschedule();
  }

  /**
   * FileOutput: each rank's output into the job folder the build names (stderr beside it when
   * any), as the folder's owner and never through a name the job made: a name the job already used
   * (or planted as a symlink) gets `<name>.1.log` instead, and if that is taken too the copy fails.
   * At most what the rotation keeps of one stream is copied (the newest part of it).
   */
  async function saveOutput(run: JobRun): Promise<void> {
    const relative = run.job.metadata.annotations?.[OUTPUT_FOLDER_ANNOTATION];
    if (relative === undefined) return;
    let folder: FileHandle | undefined;
    let rank = 0;
    try {
      folder = await openFolder(options.volumes.storageRoot, relative, { create: true });
      for (; rank < totalReplicas(run.job); rank++) {
        for (const [stream, name] of [
          ['out', logFileName(rank)],
          ['err', `stderr-${rank}.log`],
        ] as const) {
          const files = rankContainers(run, rank).map((c) => logFile(run.id, rank, c, stream));
          const parts = (await Promise.all(files.map((f) => logParts(f, rotation.maxFiles)))).flat();
          const size = parts.reduce((n, p) => n + p.size, 0);
          // A rank that started gets its stdout file even when empty; stderr only when it said something.
          if (parts.length === 0 || (stream === 'err' && size === 0)) continue;
          const cap = rotation.maxSizeBytes * rotation.maxFiles;
          const alternative = name.replace(/\.log$/, '.1.log');
          if (await writeNewFile(folder, name, concatenated(parts, Math.max(0, size - cap)))) continue;
          if (await writeNewFile(folder, alternative, concatenated(parts, Math.max(0, size - cap)))) continue;
          throw new Error(`${name} and ${alternative} already exist in the job folder`);
        }
      }
    } catch (error) {
      run.fault ??= `Could not save the output of rank ${rank}: ${(error as Error).message}`;
    } finally {
      await folder?.close();
    }
  }

  // ---- disk use -------------------------------------------------------------------------------

  /** Jobs whose folder is being measured now: one `du` per job at a time. */
  const measuring = new Set<string>();

  /** A running job whose folder grew past the limit ends FAILURE, saying how much it used. */
  async function checkDiskUse(run: JobRun, limit: number): Promise<void> {
    const relative = run.job.metadata.annotations?.[OUTPUT_FOLDER_ANNOTATION];
    if (relative === undefined || run.phase !== 'Running' || measuring.has(run.id)) return;
    measuring.add(run.id);
    let folder: FileHandle | undefined;
    try {
      folder = await openFolder(options.volumes.storageRoot, relative, { create: true });
      const used = await diskUse(folder);
      if (used > limit && !isFinalPhase(run.phase)) {
        await step(run, async () => {
          run.fault ??= `The job used ${describeBytes(used)} of its ${describeBytes(limit)} disk limit in its job folder`;
          await kill(run, 'TerminateJob');
        });
      }
    } catch (err) {
      options.log?.warn({ err, jobId: run.id }, 'could not measure the disk use of a job folder');
    } finally {
      measuring.delete(run.id);
      await folder?.close();
    }
  }

  const diskLimit = options.diskLimitBytes;
  const diskTimer =
    diskLimit === undefined
      ? undefined
      : setInterval(() => {
          for (const run of runs.values()) void checkDiskUse(run, diskLimit);
        }, options.diskCheckIntervalMs ?? 10_000);
  diskTimer?.unref();

  // ---- the scheduler ------------------------------------------------------------------------

  let scheduling = false;
  let again = false;
  /** When each queue last had a job started: owners at equal shares take turns by it. */
  const lastStarts = new Map<string, number>();

  /** Admits the waiting jobs that fit, in fair order, and tells the others where they stand. */
  function reschedule(): void {
    if (scheduling) {
      again = true;
      return;
    }
    scheduling = true;
    setImmediate(() => {
      scheduling = false;
      const active = [...runs.values()].filter((r) => !isFinalPhase(r.phase));
      const waiting = active.filter((r) => !r.admitted);
      if (waiting.length > 0) {
        const decision = schedule(
          runtime.capacity,
          active
            .filter((r) => r.admitted)
            .map((r) => ({
              id: r.id,
              queue: r.job.spec.queue ?? 'default',
              holds: held(r),
              endsAt: r.timeLimitMs === null || r.startedAt === null ? null : r.startedAt + r.timeLimitMs,
            })),
          waiting.map((r) => ({
            id: r.id,
            queue: r.job.spec.queue ?? 'default',
            weight: Number(r.job.metadata.annotations?.[FAIR_SHARE_WEIGHT_ANNOTATION] ?? 1) || 1,
            demand: r.demand,
            submittedAt: r.submittedAt,
            timeLimitMs: r.timeLimitMs,
          })),
          now(),
          lastStarts,
        );
        for (const id of decision.start) {
          const run = runs.get(id)!;
          run.admitted = true;
          lastStarts.set(run.job.spec.queue ?? 'default', now());
          void step(run, () => sync(run));
        }
        for (const [id, w] of decision.waiting) report(runs.get(id)!, w);
      }
      // After the admissions, so that replicas beyond a gang never take a waiting job's turn.
      const free = freeCapacity();
      for (const run of active) if (mayGrow(run, free)) void step(run, () => sync(run));
      if (again) {
        again = false;
        reschedule();
      }
    });
  }

  // ---- recovery -----------------------------------------------------------------------------

  /** Finds the jobs of an earlier run again: live pods re-adopted, lost ones reported as evicted. */
  async function recover(): Promise<void> {
    const pods = new Map((await runtime.recover()).map((p) => [p.name, p]));
    for (const id of await readdir(jobsDir)) {
      let saved: SavedJob;
      try {
        saved = JSON.parse(await readFile(join(jobDir(id), 'state.json'), 'utf8')) as SavedJob;
      } catch {
        await rm(jobDir(id), { recursive: true, force: true }); // never got past its first write
        continue;
      }
      const run = newRun(saved);
      runs.set(id, run);
      if (isFinalPhase(run.phase)) {
        endedOrder.push(id);
        report(run);
        run.end();
        continue;
      }
      const lost: PodRecord[] = [];
      for (const s of saved.pods) {
        const plan = run.planned.find((p) => p.name === s.name);
        if (!plan) continue;
        const rec: PodRecord = { plan, phase: s.phase, restarts: s.restarts, killing: false };
        if (s.exit) rec.exit = s.exit;
        if (s.fault) rec.fault = s.fault;
        run.pods.set(s.name, rec);
        if (rec.phase !== 'Running' && rec.phase !== 'Pending') continue;
        const pod = pods.get(runtimePodName(run, plan));
        pods.delete(runtimePodName(run, plan));
        const containers = pod?.containers() ?? [];
        if (pod && rec.phase === 'Running' && containers.length > 0) {
          rec.pod = pod;
          watch(
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
        void step(run, async () => {
          rec.phase = 'Failed';
          rec.fault = `Rank ${rec.plan.rank} was lost while ucompute restarted`;
          await podEvent(run, rec, 'PodEvicted');
        });
      }
      if (lost.length === 0) report(run);
      if (run.sshPort !== undefined) await openSsh(run);
    }
    for (const orphan of pods.values()) await orphan.destroy(0);
    reschedule();
  }

  await recover();

  // ---- logs ---------------------------------------------------------------------------------

  /**
   * Every rank's output in chunks of at most 64 KiB, each container's files from the oldest kept
   * byte; pulled by the reader, so that a slow one holds one chunk, not the log.
   */
  async function* readLogs(run: JobRun, follow: boolean, signal?: AbortSignal): AsyncGenerator<LogChunk> {
    const cursors = new Map<string, LogCursor | null>();
    const decoders = new Map<string, StringDecoder>();
    const buffer = Buffer.allocUnsafe(LOG_CHUNK_BYTES);
    for (;;) {
      const finished = isFinalPhase(run.phase);
      let progressed = false;
      for (let rank = 0; rank < totalReplicas(run.job); rank++) {
        for (const container of rankContainers(run, rank)) {
          for (const stream of ['out', 'err'] as const) {
            const file = logFile(run.id, rank, container, stream);
            const chunk = await readLogChunk(file, rotation.maxFiles, cursors.get(file) ?? null, buffer);
            if (!chunk) continue;
            cursors.set(file, chunk.cursor);
            progressed = true;
            const decoder = decoders.get(file) ?? new StringDecoder('utf8');
            decoders.set(file, decoder);
            const text = decoder.write(chunk.bytes);
            if (text) yield { rank, ...(stream === 'out' ? { stdout: text } : { stderr: text }) };
            if (signal?.aborted) return;
          }
        }
      }
      if (progressed) continue;
      if (!follow || finished || signal?.aborted || closed) return;
      await Promise.race([
        run.ended,
        new Promise((resolve) => setTimeout(resolve, LOG_POLL_MS)),
        new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true })),
      ]);
    }
  }

  function activeRun(jobId: string): JobRun {
    const run = runs.get(jobId);
    if (!run || isFinalPhase(run.phase)) throw new Error(`job ${jobId} is not running here`);
    return run;
  }

  /** The job's SSH port, the one it had when there was one (it is in the job's updates). */
  async function openSsh(run: JobRun): Promise<SshEndpoint> {
    const port = await ssh.forwards.open(run.id, run.sshPort);
    if (port !== run.sshPort) {
      run.sshPort = port;
      await save(run);
    }
    return { host: ssh.host, port };
  }

  function runningPod(jobId: string, rank: number): Pod {
    const pod = [...activeRun(jobId).pods.values()].find((p) => p.plan.rank === rank)?.pod;
    if (!pod) throw new Error(`rank ${rank} of job ${jobId} is not running`);
    return pod;
  }

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

    async submit(jobId: string, build: JobBuild): Promise<void> {
      await submitJob(jobId, build.volcanoJob, build.companions);
    },

    submitVolcanoJob: submitJob,

    async cancel(jobId) {
      const run = runs.get(jobId);
      if (run) await terminate(run);
    },

    async suspend(jobId) {
      const run = runs.get(jobId);
      if (!run) return;
      // Its end is not the job's end: nothing it says reaches the service, and once its pods are
      // gone (their output saved to the job's folder) the run is forgotten, so a submit starts it anew.
      silenced.add(jobId);
      try {
        await terminate(run);
        await run.ended;
        runs.delete(jobId);
        const kept = endedOrder.indexOf(jobId);
        if (kept >= 0) endedOrder.splice(kept, 1);
        await rm(jobDir(jobId), { recursive: true, force: true });
      } finally {
        silenced.delete(jobId);
      }
    },

    async extend() {
      // ucompute's own monitor enforces deadlines; the scheduler reads them from the build.
    },

    async knownJobs() {
      return new Set(runs.keys());
    },

    onEvent(listener) {
      listeners.push(listener);
      for (const e of pending.splice(0)) listener(e);
    },

    async *logs(jobId, { follow, signal }) {
      const run = runs.get(jobId);
      if (run) yield* readLogs(run, follow, signal);
    },

    async shell(jobId, rank, o) {
      return runningPod(jobId, rank).shell(o);
    },

    async connect(jobId, rank, port) {
      return runningPod(jobId, rank).connect(port);
    },

    async sshEndpoint(jobId) {
      return openSsh(activeRun(jobId));
    },

    phaseOf(jobId) {
      return runs.get(jobId)?.phase;
    },

    onPhase(listener) {
      phaseListeners.push(listener);
    },

    async close() {
      closed = true;
      ssh.forwards.closeAll();
      clearInterval(diskTimer);
      await Promise.all([...runs.values()].map((r) => r.chain));
      await runtime.close();
    },
  };

  async function submitJob(id: string, job: VolcanoJob, companions: Companion[] = []): Promise<void> {
    if (runs.has(id)) return;
    const plugins = await preparePlugins(job);
    const run = newRun({
      id,
      job,
      companions,
      phase: 'Pending',
      retryCount: 0,
      admitted: false,
      submittedAt: now(),
      plugins,
    });
    await mkdir(join(jobDir(id), 'logs'), { recursive: true });
    runs.set(id, run);
    const capacity = runtime.capacity;
    if (run.demand.cpuMillis > capacity.cpuMillis || run.demand.memoryBytes > capacity.memoryBytes) {
      run.fault = `The job needs ${describe(run.demand)}; this machine offers ${describe(capacity)}`;
      run.phase = 'Failed';
      await step(run, () => finish(run));
      return;
    }
    await save(run);
    reschedule();
  }
}

/** The parts' bytes one after the other, the first `skip` left out, read 64 KiB at a time. */
function concatenated(parts: readonly { path: string }[], skip: number): Readable {
  return Readable.from(
    (async function* () {
      let toSkip = skip;
      for (const part of parts) {
        const handle = await open(part.path, 'r').catch(() => undefined);
        if (!handle) continue; // rotated away meanwhile
        try {
          const { size } = await handle.stat();
          const from = Math.min(toSkip, size);
          toSkip -= from;
          yield* handle.createReadStream({ start: from, highWaterMark: LOG_CHUNK_BYTES, autoClose: false });
        } finally {
          await handle.close();
        }
      }
    })(),
  );
}

function describeBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * Why a container ended that the job did not decide: its supervisor vanished, its sandbox failed
 * (its exit code is then the sandbox's, not the application's), or SIGKILL that was neither
 * ucompute's nor the OOM killer's (a replica ucompute stops is not watched any more).
 * Nothing in a sandbox tells a command's own `exit 137` from SIGKILL; both read as SIGKILL here.
 */
function killedFromOutside(rank: number, exit: ContainerExit): string | null {
  if (exit.supervisorLost) return `ucompute lost the supervisor of rank ${rank}`;
  if (exit.sandboxFailure) return `Rank ${rank} could not run: its sandbox failed: ${exit.sandboxFailure}`;
  if (exit.signal === 'SIGKILL' && !exit.oomKilled) {
    return `Rank ${rank} was killed by SIGKILL from outside the job`;
  }
  return null;
}

/** The product's process limit for each replica; null: the runtime's default. */
function pidsLimit(job: VolcanoJob): number | null {
  const pids = Number(job.metadata.annotations?.[PIDS_LIMIT_ANNOTATION]);
  return Number.isInteger(pids) && pids > 0 ? pids : null;
}

/** The runtime's name for a pod: unique on the machine (the job id is), whatever the job's name. */
function runtimePodName(run: { id: string; job: VolcanoJob }, plan: PodPlan): string {
  return run.job.metadata.name === volcanoJobName(run.id)
    ? plan.name
    : `${run.id}-${plan.task.name}-${plan.index}`;
}

/** The Backend, plus what `vcjob run` and the tests need: Volcano Jobs as they are, and their phases. */
export interface LocalBackend extends Backend {
  /** Runs a Volcano Job manifest as it is, under this id. */
  submitVolcanoJob(id: string, job: VolcanoJob, companions?: Companion[]): Promise<void>;
  phaseOf(jobId: string): VolcanoJobPhase | undefined;
  /** Called with every phase a job enters. */
  onPhase(listener: (jobId: string, phase: VolcanoJobPhase) => void): void;
}
