import type { LargestMachine, MachineSize, Machines } from '../../jobs/backend.ts';
import { bytes, cpuMillis } from '../../volcano/api/quantity.ts';

// biome-ignore lint/suspicious/noExplicitAny: API objects are checked field by field.
type Raw = any;

/** What a node offers pods (its allocatable CPU and memory), and whether it takes new pods. */
export interface NodeSummary extends MachineSize {
  schedulable: boolean;
}

/** A node's allocatable CPU and memory (0 for a figure it does not report, or reports badly). */
export function summarizeNode(o: Raw): NodeSummary {
  const allocatable = o?.status?.allocatable;
  const figure = (read: (q: string) => number, quantity: unknown): number => {
    if (typeof quantity !== 'string' && typeof quantity !== 'number') return 0;
    try {
      return Math.max(0, read(String(quantity)));
    } catch {
      return 0;
    }
  };
  return {
    cpuMillis: figure(cpuMillis, allocatable?.cpu),
    memoryBytes: figure(bytes, allocatable?.memory),
    schedulable: o?.spec?.unschedulable !== true,
  };
}

/**
 * The cluster's machines from its nodes. The total counts every node (utilization). The largest
 * machine has CPU and memory each at its largest over the nodes that take new pods and report
 * both (a job that needs more of either fits no node); null when there are none. Tainted nodes
 * count: a toleration may reach them, and refusing a job that could run is worse than one that
 * waits.
 */
export function machinesOf(nodes: Iterable<NodeSummary>): Machines {
  let cpu = 0;
  let memory = 0;
  let cpuMillis = 0;
  let memoryBytes = 0;
  for (const n of nodes) {
    cpu += n.cpuMillis;
    memory += n.memoryBytes;
    if (!n.schedulable || n.cpuMillis === 0 || n.memoryBytes === 0) continue;
    cpuMillis = Math.max(cpuMillis, n.cpuMillis);
    memoryBytes = Math.max(memoryBytes, n.memoryBytes);
  }
  const largest: LargestMachine | null =
    cpuMillis > 0 ? { cpuMillis, memoryBytes, holdsEveryReplica: false } : null;
  return { total: { cpu: cpu / 1000, memory }, largest };
}
