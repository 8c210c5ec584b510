import type { MachineSize } from '../../jobs/backend.ts';
import { bytes, cpuMillis } from '../../volcano/quantity.ts';

// biome-ignore lint/suspicious/noExplicitAny: API objects are checked field by field.
type Raw = any;

/**
 * What a node offers pods (its allocatable CPU and memory); undefined for a node that takes no new
 * pods (cordoned) or reports no usable figures. Tainted nodes count: a toleration may reach them,
 * and refusing a job that could run is worse than one that waits.
 */
export function summarizeNode(o: Raw): MachineSize | undefined {
  if (o?.spec?.unschedulable === true) return undefined;
  const allocatable = o?.status?.allocatable;
  try {
    const size = { cpuMillis: cpuMillis(allocatable?.cpu), memoryBytes: bytes(allocatable?.memory) };
    return size.cpuMillis > 0 && size.memoryBytes > 0 ? size : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The largest machine of the nodes, CPU and memory each at its largest (a job that needs more of
 * either fits no node); null when there are none.
 */
export function largestNode(nodes: Iterable<MachineSize>): MachineSize | null {
  let largest: MachineSize | null = null;
  for (const n of nodes) {
    largest = largest
      ? {
          cpuMillis: Math.max(largest.cpuMillis, n.cpuMillis),
          memoryBytes: Math.max(largest.memoryBytes, n.memoryBytes),
        }
      : n;
  }
  return largest;
}
