import type { Container, Probe } from '../../../volcano/api/types.ts';
import type { PodPlan } from '../../../volcano/emulation/plugins/plugin.ts';

/**
 * The kubelet's prober (pkg/kubelet/prober/worker.go) as pure decisions over data: when a probe
 * runs, what a run of results means once it reaches its threshold, whether a container is started
 * and ready, and what a failure says. prober.ts runs the probes on the injected clock and carries
 * these out.
 */

export type ProbeKind = 'startupProbe' | 'livenessProbe' | 'readinessProbe';
/** In the order the kubelet gates them: startup first, liveness and readiness only once started. */
export const PROBE_KINDS: readonly ProbeKind[] = ['startupProbe', 'livenessProbe', 'readinessProbe'];

export interface ProbeTiming {
  initialDelaySeconds: number;
  periodMs: number;
  timeoutMs: number;
  successThreshold: number;
  failureThreshold: number;
}

/** Kubernetes' defaults: 0 or absent means period 10 s, timeout 1 s, thresholds 1 and 3. */
export function probeTiming(probe: Probe): ProbeTiming {
  const or = (v: number | undefined, fallback: number) => (v === undefined || v === 0 ? fallback : v);
  return {
    initialDelaySeconds: probe.initialDelaySeconds ?? 0,
    periodMs: or(probe.periodSeconds, 10) * 1000,
    timeoutMs: or(probe.timeoutSeconds, 1) * 1000,
    successThreshold: or(probe.successThreshold, 1),
    failureThreshold: or(probe.failureThreshold, 3),
  };
}

/** One probe of one container, as its worker keeps it. */
export interface ProbeWorker {
  kind: ProbeKind;
  container: Container;
  probe: Probe;
  timing: ProbeTiming;
  /** The last result and how many times in a row it came. */
  last: boolean | null;
  run: number;
}

/** What the kubelet knows of a container: started (its startupProbe passed) and ready. */
export interface ContainerProbeState {
  started: boolean;
  ready: boolean;
}

/** The workers of a pod's main containers, and each container's initial state (started unless it has a startupProbe; never ready at first when it has a readinessProbe). */
export function podProbes(plan: PodPlan): {
  workers: ProbeWorker[];
  containers: Map<string, ContainerProbeState>;
} {
  const workers: ProbeWorker[] = [];
  const containers = new Map<string, ContainerProbeState>();
  for (const container of plan.task.template.spec.containers) {
    const started = container.startupProbe === undefined;
    containers.set(container.name, { started, ready: started && container.readinessProbe === undefined });
    for (const kind of PROBE_KINDS) {
      const probe = container[kind];
      if (probe) workers.push({ kind, container, probe, timing: probeTiming(probe), last: null, run: 0 });
    }
  }
  return { workers, containers };
}

/** Whether a pod's readiness waits for probes: some main container has a startup or readiness probe. */
export const gatedByProbes = (plan: PodPlan): boolean =>
  plan.task.template.spec.containers.some(
    (c) => c.startupProbe !== undefined || c.readinessProbe !== undefined,
  );

/** Whether the worker probes now, `elapsedMs` after its container started (the kubelet counts whole seconds). */
export function probesNow(worker: ProbeWorker, state: ContainerProbeState, elapsedMs: number): boolean {
  if (Math.floor(elapsedMs / 1000) < worker.timing.initialDelaySeconds) return false;
  return worker.kind === 'startupProbe' ? !state.started : state.started;
}

/** What a result means once its run reaches its threshold. */
export type ProbeVerdict =
  | { kind: 'none' }
  /** The startup probe passed: liveness and readiness probes begin. */
  | { kind: 'started' }
  /** The readiness probe passed or failed as many times in a row as its threshold asks. */
  | { kind: 'ready'; ready: boolean }
  /** A liveness or startup probe failed: the container is killed and restarted per restartPolicy. */
  | { kind: 'kill' };

/** The worker's next counts and the verdict of one result (`ok`), as doProbe keeps them. */
export function probeResult(
  worker: ProbeWorker,
  ok: boolean,
): { worker: ProbeWorker; verdict: ProbeVerdict } {
  const run = worker.last === ok ? worker.run + 1 : 1;
  const next = { ...worker, last: ok, run };
  const threshold = ok ? worker.timing.successThreshold : worker.timing.failureThreshold;
  if (run < threshold) return { worker: next, verdict: { kind: 'none' } };
  if (worker.kind === 'readinessProbe') return { worker: next, verdict: { kind: 'ready', ready: ok } };
  // After a kill the worker waits for the restarted container with its counts cleared.
  if (!ok) return { worker: { ...next, run: 0 }, verdict: { kind: 'kill' } };
  return { worker: next, verdict: worker.kind === 'startupProbe' ? { kind: 'started' } : { kind: 'none' } };
}

/** A container's state after a verdict: once started, it is ready unless a readinessProbe still has to say so. */
export function containerAfter(
  state: ContainerProbeState,
  container: Container,
  verdict: ProbeVerdict,
): ContainerProbeState {
  if (verdict.kind === 'started') return { started: true, ready: container.readinessProbe === undefined };
  if (verdict.kind === 'ready') return { ...state, ready: verdict.ready };
  return state;
}

/** Every main container ready: the pod's Ready condition. */
export const podReady = (containers: ReadonlyMap<string, ContainerProbeState>): boolean =>
  [...containers.values()].every((c) => c.ready);

/** What the probe did, in words: `exec test -e /tmp/up`, `httpGet :8080/ready`, `tcpSocket :5432`. */
export function probeTarget(probe: Probe): string {
  if (probe.exec) return `exec ${probe.exec.command.join(' ')}`;
  if (probe.httpGet) return `httpGet :${probe.httpGet.port}${probe.httpGet.path ?? '/'}`;
  return `tcpSocket :${probe.tcpSocket?.port}`;
}

const KIND_WORDS: Record<ProbeKind, string> = {
  startupProbe: 'startup probe',
  livenessProbe: 'liveness probe',
  readinessProbe: 'readiness probe',
};

/** Why a failing probe failed, said once its threshold is reached: `why` is the last failure's words. */
export function probeFailure(plan: PodPlan, worker: ProbeWorker, why: string): string {
  const times = worker.timing.failureThreshold;
  const said = `Rank ${plan.rank}: container ${worker.container.name} failed its ${KIND_WORDS[worker.kind]} (${probeTarget(worker.probe)}) ${times === 1 ? 'once' : `${times} times in a row`}: ${why}`;
  return worker.kind === 'readinessProbe' ? `${said}; it is not Ready` : said;
}

/**
 * A port as the probe names it: a number, or the name of one of the container's ports (validation
 * made sure it names one).
 */
export function probePort(container: Container, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = container.ports?.find((p) => p.name === port);
  if (!named) throw new Error(`container ${container.name} has no port named ${port}`);
  return named.containerPort;
}
