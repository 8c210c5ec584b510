import { arch, hostname } from 'node:os';
import { type IssueList, joinPath } from '../../model/errors.ts';
import { parseQuantity } from '../api/quantity.ts';

/**
 * Fields of a Volcano Job that the local backend (one machine, no cluster) cannot honour. A job
 * that asks for one is refused with every such field named, never run as if the field were not
 * there: accelerators, host ports, job-level volumes (PVCs Volcano would create), node selection beyond this
 * machine's own labels, priorities, other schedulers, delayed policy
 * actions and Volcano's topology and partition features.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The resources the local scheduler accounts for and the runtime bounds. */
const LOCAL_RESOURCES = ['cpu', 'memory'];
const VOLCANO_SCHEDULER = 'volcano';

/** The well-known labels of the one node the local backend is, as the kubelet sets them. */
export function localNodeLabels(): Record<string, string> {
  const goArch: Record<string, string> = {
    x64: 'amd64',
    arm64: 'arm64',
    arm: 'arm',
    ppc64: 'ppc64le',
    s390x: 's390x',
  };
  return {
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': goArch[arch()] ?? arch(),
    'kubernetes.io/hostname': hostname(),
  };
}

const notHere = (what: string) => `the local backend cannot honour ${what}; remove it to run here`;

/** Issues for the job-level fields (`spec` at `at`) the local backend cannot honour. */
export function checkJobFields(spec: Json, at: string, issues: IssueList): void {
  if (spec.volumes !== undefined) {
    issues.add(joinPath(at, 'volumes'), notHere('job-level volumes (claims Volcano would create)'));
  }
  if (spec.priorityClassName !== undefined) {
    issues.add(joinPath(at, 'priorityClassName'), notHere('priority classes'));
  }
  if (spec.networkTopology !== undefined) {
    issues.add(joinPath(at, 'networkTopology'), notHere('network topology placement'));
  }
  checkScheduler(spec.schedulerName, joinPath(at, 'schedulerName'), issues);
}

/** Issues for one task's fields (task at `at`) the local backend cannot honour. */
export function checkTaskFields(task: Json, at: string, issues: IssueList): void {
  for (const key of ['topologyPolicy', 'partitionPolicy'] as const) {
    if (task[key] !== undefined && task[key] !== 'none') {
      issues.add(joinPath(at, key), notHere(`Volcano's ${key}`));
    }
  }
}

/** Issues for the pod template's fields (pod spec at `at`) the local backend cannot honour. */
export function checkPodFields(pod: Json, at: string, issues: IssueList): void {
  if (pod.nodeSelector !== undefined) {
    const labels = localNodeLabels();
    const selector = isObject(pod.nodeSelector) ? pod.nodeSelector : {};
    for (const [key, value] of Object.entries(selector)) {
      if (labels[key] !== value) {
        issues.add(
          joinPath(joinPath(at, 'nodeSelector'), key),
          `selects nodes labelled ${key}=${String(value)}; this machine is ${key}=${labels[key] ?? '(no such label)'}`,
        );
      }
    }
  }
  for (const key of ['affinity', 'nodeName', 'priorityClassName', 'runtimeClassName'] as const) {
    if (pod[key] !== undefined) issues.add(joinPath(at, key), notHere(key));
  }
  checkScheduler(pod.schedulerName, joinPath(at, 'schedulerName'), issues);
  for (const list of ['initContainers', 'containers'] as const) {
    const containers = pod[list];
    if (!Array.isArray(containers)) continue;
    containers.forEach((c: unknown, i) => {
      if (!isObject(c)) return;
      const container = joinPath(joinPath(at, list), i);
      if (Array.isArray(c.ports)) {
        c.ports.forEach((p: unknown, j) => {
          if (isObject(p) && p.hostPort !== undefined && p.hostPort !== 0) {
            issues.add(
              joinPath(joinPath(joinPath(container, 'ports'), j), 'hostPort'),
              notHere('host ports'),
            );
          }
        });
      }
      if (!isObject(c.resources)) return;
      const where = joinPath(container, 'resources');
      for (const kind of ['requests', 'limits'] as const) {
        const resources = c.resources[kind];
        if (resources === undefined) continue;
        if (!isObject(resources)) {
          issues.add(joinPath(where, kind), 'must map resource names to quantities');
          continue;
        }
        for (const [name, quantity] of Object.entries(resources)) {
          const field = joinPath(joinPath(where, kind), name);
          if (!LOCAL_RESOURCES.includes(name)) {
            issues.add(field, notHere(`${name} (this machine offers ${LOCAL_RESOURCES.join(' and ')})`));
          } else if (!isQuantity(quantity)) {
            issues.add(field, 'must be a quantity such as 500m, 2, 4Gi or a number');
          }
        }
      }
    });
  }
}

function isQuantity(v: unknown): boolean {
  if (typeof v !== 'string' && typeof v !== 'number') return false;
  try {
    return parseQuantity(v) >= 0;
  } catch {
    return false;
  }
}

function checkScheduler(name: unknown, at: string, issues: IssueList): void {
  if (name !== undefined && name !== VOLCANO_SCHEDULER) {
    issues.add(at, `the local backend schedules as ${VOLCANO_SCHEDULER} does, not as ${String(name)}`);
  }
}
