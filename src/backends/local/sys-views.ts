import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { CgroupLayout, Controller, Hierarchy } from './cgroups.ts';

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
export const topologyViews = () => (topology ??= TOPOLOGY.filter((path) => existsSync(path)));

/**
 * The v1 controllers runtimes size themselves by: the JVM needs all four (it ignores the
 * container's limits when one is missing: a 1 GiB job's JVM then took 6 GiB), Go and libuv read
 * cpu and memory. Not v1's pids hierarchy (one of its own on most v1 hosts): nothing sizes itself
 * by it, and each view is a mount that every container start makes, and every end undoes, under
 * the kernel's one lock of mount namespaces.
 */
const READ: ReadonlySet<Controller> = new Set(['memory', 'cpu', 'cpuacct', 'cpuset']);

/** A hierarchy a container is shown, where the host mounts it: a v2 one (one holds every controller), or a v1 one runtimes read. */
const shown = (h: Hierarchy) =>
  h.root.startsWith(CGROUP_MOUNTS) && (h.version === 2 || h.controllers.some((c) => READ.has(c)));

/** The hierarchies whose pod folders containers are shown. */
export const shownHierarchies = (layout: CgroupLayout | null): Hierarchy[] =>
  layout?.hierarchies.filter(shown) ?? [];

/**
 * What of /sys a pod's containers see: the topology, and each of the pod's own cgroup folders
 * where the host mounts its hierarchy, as OCI runtimes show a container its cgroups without a
 * cgroup namespace. The JVM, Go's runtime and libuv (Node) size heaps and threads by the limits
 * they find there: without them a JVM in a 1 GiB pod took a quarter of the host's memory as its
 * heap. Nothing else of /sys: not the other pods' groups, the host's devices or its network.
 */
export function sysViews(layout: CgroupLayout | null, podCgroups: readonly string[]): SysView[] {
  const views = topologyViews().map((path) => ({ source: path, target: path }));
  for (const dir of podCgroups) {
    const hierarchy = layout?.hierarchies.find((h) => dir.startsWith(`${h.root}/`));
    if (hierarchy && shown(hierarchy)) views.push({ source: dir, target: hierarchy.root });
  }
  return views;
}

/**
 * The folder a container's /sys is (bound read-only): empty folders where sysViews' views are
 * bound. One bind of it costs a container start less than a tmpfs, the folders on the way and a
 * remount to read-only (issue 18). Made at each start, never emptied: its folders are mount points
 * in running containers, and removing one would unmount their views.
 */
export async function prepareSysRoot(dir: string, layout: CgroupLayout | null): Promise<void> {
  const targets = [...topologyViews(), ...shownHierarchies(layout).map((h) => h.root)];
  // Every folder 0755 whatever the umask: bubblewrap finds them as the container's host user.
  const folders = new Set([dir]);
  for (const target of targets) {
    for (let folder = target; folder !== '/sys'; folder = posix.dirname(folder))
      folders.add(join(dir, posix.relative('/sys', folder)));
  }
  for (const folder of [...folders].sort()) {
    await mkdir(folder).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    await chmod(folder, 0o755);
  }
}
