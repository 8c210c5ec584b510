import { existsSync } from 'node:fs';
import type { CgroupLayout } from './cgroups.ts';

/** A host folder of /sys shown read-only in a container at `target`. */
export interface SysView {
  source: string;
  target: string;
}

/** Where hierarchies are mounted on a host, and where a container looks for them. */
const CGROUP_MOUNTS = '/sys/fs/cgroup';

/** The CPUs' and memory nodes' topology: hwloc (so Open MPI), OpenBLAS and lscpu read it. */
const TOPOLOGY = ['/sys/devices/system/cpu', '/sys/devices/system/node'];
let topology: readonly string[] | undefined;

/**
 * What of /sys a pod's containers see: the topology, and each of the pod's own cgroup folders
 * where the host mounts its hierarchy, as OCI runtimes show a container its cgroups without a
 * cgroup namespace. The JVM, Go's runtime and libuv (Node) size heaps and threads by the limits
 * they find there: without them a JVM in a 1 GiB pod took a quarter of the host's memory as its
 * heap. Nothing else of /sys: not the other pods' groups, the host's devices or its network.
 */
export function sysViews(layout: CgroupLayout | null, podCgroups: readonly string[]): SysView[] {
  topology ??= TOPOLOGY.filter((path) => existsSync(path));
  const views = topology.map((path) => ({ source: path, target: path }));
  for (const dir of podCgroups) {
    const hierarchy = layout?.hierarchies.find((h) => dir.startsWith(`${h.root}/`));
    if (hierarchy?.root.startsWith(CGROUP_MOUNTS)) views.push({ source: dir, target: hierarchy.root });
  }
  return views;
}
