import { type IssueList, joinPath } from '../../model/errors.ts';

/**
 * A container's readiness, liveness and startup probes, checked as Kubernetes' validation checks
 * them (one handler each, non-negative timings, successThreshold 1 for liveness and startup, no
 * probes on init containers), and refused, naming the field, where the local backend's prober
 * (src/backends/local/controller/prober.ts) cannot do what the kubelet would: gRPC probes, HTTPS,
 * and probing another host than the pod.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export const PROBE_KINDS = ['readinessProbe', 'livenessProbe', 'startupProbe'] as const;
const HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'grpc'];
const TIMINGS = [
  'initialDelaySeconds',
  'periodSeconds',
  'timeoutSeconds',
  'successThreshold',
  'failureThreshold',
];
const PROBE_KEYS = [...HANDLERS, ...TIMINGS, 'terminationGracePeriodSeconds'];
const IANA_SVC_NAME = /^(?=.*[a-z])[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/;

const notHere = (what: string) => `the local backend cannot honour ${what}; remove it to run here`;

/** Issues for the probes of one container (`c` at `at`); `init`: it is an init container. */
export function checkProbes(c: Json, at: string, init: boolean, issues: IssueList): void {
  for (const kind of PROBE_KINDS) {
    const probe = c[kind];
    if (probe === undefined) continue;
    const where = joinPath(at, kind);
    if (init) issues.add(where, 'init containers have no probes (Kubernetes refuses them)');
    else if (!isObject(probe)) issues.add(where, 'must be a probe');
    else checkProbe(kind, probe, c, where, issues);
  }
}

function checkProbe(kind: (typeof PROBE_KINDS)[number], probe: Json, c: Json, at: string, issues: IssueList) {
  for (const key of Object.keys(probe)) {
    if (!PROBE_KEYS.includes(key)) issues.add(joinPath(at, key), notHere(`the probe field ${key}`));
  }
  const handlers = HANDLERS.filter((h) => probe[h] !== undefined);
  if (handlers.length !== 1) issues.add(at, 'must have exactly one of exec, httpGet, tcpSocket (or grpc)');
  for (const key of TIMINGS) {
    const v = probe[key];
    if (v !== undefined && !(Number.isInteger(v) && (v as number) >= 0)) {
      issues.add(joinPath(at, key), 'must be a whole number of 0 or more (0: the default)');
    }
  }
  if (kind !== 'readinessProbe' && probe.successThreshold !== undefined && probe.successThreshold !== 1) {
    issues.add(joinPath(at, 'successThreshold'), `must be 1 for a ${kind}`);
  }
  const grace = probe.terminationGracePeriodSeconds;
  if (grace !== undefined) {
    const field = joinPath(at, 'terminationGracePeriodSeconds');
    if (kind === 'readinessProbe') issues.add(field, 'is not allowed on a readinessProbe');
    else if (!(Number.isInteger(grace) && (grace as number) > 0))
      issues.add(field, 'must be a whole number above 0');
  }
  if (probe.grpc !== undefined) issues.add(joinPath(at, 'grpc'), notHere('gRPC probes'));
  if (probe.exec !== undefined) checkExec(probe.exec, joinPath(at, 'exec'), issues);
  for (const handler of ['httpGet', 'tcpSocket'] as const) {
    const h = probe[handler];
    if (h === undefined) continue;
    const where = joinPath(at, handler);
    if (!isObject(h)) {
      issues.add(where, 'must be an object with a port');
      continue;
    }
    checkPort(h.port, c, joinPath(where, 'port'), issues);
    if (h.host !== undefined)
      issues.add(joinPath(where, 'host'), notHere('probing another host than the pod'));
    if (handler === 'httpGet') checkHttpGet(h, where, issues);
  }
}

function checkExec(exec: unknown, at: string, issues: IssueList): void {
  const command = isObject(exec) ? exec.command : undefined;
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string')) {
    issues.add(joinPath(at, 'command'), 'must be a non-empty list of strings');
  }
}

function checkHttpGet(h: Json, at: string, issues: IssueList): void {
  if (h.path !== undefined && (typeof h.path !== 'string' || !h.path.startsWith('/'))) {
    issues.add(joinPath(at, 'path'), 'must be a path starting with /');
  }
  if (h.scheme !== undefined && h.scheme !== 'HTTP') {
    issues.add(
      joinPath(at, 'scheme'),
      h.scheme === 'HTTPS' ? notHere('HTTPS probes') : 'must be HTTP or HTTPS',
    );
  }
  const headers = h.httpHeaders;
  if (
    headers !== undefined &&
    !(
      Array.isArray(headers) &&
      headers.every(
        (x) => isObject(x) && typeof x.name === 'string' && x.name !== '' && typeof x.value === 'string',
      )
    )
  ) {
    issues.add(joinPath(at, 'httpHeaders'), 'must be a list of {name, value} strings');
  }
}

/** A port number, or the name of one of the container's ports (as the kubelet resolves it). */
function checkPort(port: unknown, c: Json, at: string, issues: IssueList): void {
  if (typeof port === 'number') {
    if (!(Number.isInteger(port) && port >= 1 && port <= 65535))
      issues.add(at, 'must be a port from 1 to 65535');
    return;
  }
  if (typeof port !== 'string' || !IANA_SVC_NAME.test(port)) {
    issues.add(at, 'must be a port number or the name of a container port');
    return;
  }
  const named = Array.isArray(c.ports) && c.ports.some((p) => isObject(p) && p.name === port);
  if (!named) issues.add(at, `names no port of the container (its ports: ${portNames(c) || 'none named'})`);
}

const portNames = (c: Json): string =>
  (Array.isArray(c.ports) ? c.ports : [])
    .flatMap((p: unknown) => (isObject(p) && typeof p.name === 'string' ? [p.name] : []))
    .join(', ');
