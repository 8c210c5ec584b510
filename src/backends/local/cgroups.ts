import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResourceLimits } from './runtime.ts';

/**
 * The controllers a pod's limits need, cgroup v1's CPU accounting (`cpuacct`), which sets no
 * limit but counts the CPU time the live resource views read (cgroup v2 counts it in every group),
 * and v1's `cpuset`, which limits nothing here but which the JVM needs to see, beside memory, cpu
 * and cpuacct, before it sizes its heap and threads by the container's limits (see sandbox.ts).
 */
export type Controller = 'memory' | 'cpu' | 'pids' | 'cpuacct' | 'cpuset';
const CONTROLLERS: readonly Controller[] = ['memory', 'cpu', 'pids'];

/** One mounted cgroup hierarchy that holds some of the controllers we use. */
export interface Hierarchy {
  version: 1 | 2;
  /** Mount point of the hierarchy. */
  root: string;
  controllers: Controller[];
}

/**
 * Where each controller lives on this machine: cgroup v2 when its controller is enabled there,
 * else the v1 hierarchy that has it. Machines often mix both (v2 without memory/cpu, v1 with them).
 */
export interface CgroupLayout {
  hierarchies: Hierarchy[];
  /** Controllers found nowhere: their limits cannot be enforced. */
  missing: Controller[];
}

const CFS_PERIOD_US = 100_000;

export async function detectCgroups(mountinfo?: string): Promise<CgroupLayout> {
  const text = mountinfo ?? (await readFile('/proc/self/mountinfo', 'utf8'));
  let v2Root: string | null = null;
  const v1: { root: string; controllers: Controller[]; accounts: boolean; cpusets: boolean }[] = [];
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const mountPoint = left.split(' ')[4];
    const [fsType, , superOptions = ''] = right.split(' ');
    if (!mountPoint) continue;
    if (fsType === 'cgroup2') v2Root = mountPoint;
    if (fsType === 'cgroup') {
      const options = superOptions.split(',');
      v1.push({
        root: mountPoint,
        controllers: CONTROLLERS.filter((c) => options.includes(c)),
        accounts: options.includes('cpuacct'),
        cpusets: options.includes('cpuset'),
      });
    }
  }
  const v2Controllers = v2Root ? await readV2Controllers(v2Root) : [];
  const hierarchies: Hierarchy[] = [];
  const missing: Controller[] = [];
  const v2Used = CONTROLLERS.filter((c) => v2Controllers.includes(c));
  if (v2Root && v2Used.length > 0) hierarchies.push({ version: 2, root: v2Root, controllers: v2Used });
  for (const controller of CONTROLLERS) {
    if (v2Used.includes(controller)) continue;
    const mount = v1.find((h) => h.controllers.includes(controller));
    if (!mount) {
      missing.push(controller);
      continue;
    }
    const known = hierarchies.find((h) => h.root === mount.root);
    if (known) known.controllers.push(controller);
    else hierarchies.push({ version: 1, root: mount.root, controllers: [controller] });
  }
  // Without any controller a plain v2 cgroup still tracks every process of a pod.
  if (hierarchies.length === 0 && v2Root) hierarchies.push({ version: 2, root: v2Root, controllers: [] });
  // CPU time: counted by a v2 group (cpu.stat), else by v1's cpuacct, kept last so that the
  // hierarchies of pods made before keep their places.
  // v1 only, each after what came before it, likewise: CPU time, then the CPU set.
  const visible = [
    ['cpuacct', v1.find((h) => h.accounts)?.root],
    ['cpuset', v1.find((h) => h.cpusets)?.root],
  ] as const;
  for (const [controller, root] of visible) {
    if (hierarchies.some((h) => h.version === 2) || root === undefined) continue;
    const known = hierarchies.find((h) => h.root === root);
    if (known) known.controllers.push(controller);
    else hierarchies.push({ version: 1, root, controllers: [controller] });
  }
  return { hierarchies, missing };
}

async function readV2Controllers(root: string): Promise<string[]> {
  try {
    return (await readFile(join(root, 'cgroup.controllers'), 'utf8')).trim().split(/\s+/);
  } catch {
    return [];
  }
}

export function describeCgroups(layout: CgroupLayout): string {
  const parts = layout.hierarchies.map((h) => `v${h.version}(${h.controllers.join('+') || 'tracking only'})`);
  return `cgroups ${parts.join(' ') || 'none'}`;
}

/** The folders of one pod's cgroup, one per hierarchy, in the instance's folder `parent` (see host-names.ts). */
export function podCgroupDirs(layout: CgroupLayout, parent: string, pod: string): string[] {
  return layout.hierarchies.map((h) => join(h.root, parent, pod));
}

/**
 * Makes the pod's cgroups and writes its limits; a process joins by writing its pid to each
 * `cgroup.procs`. The pods' files are written with the synchronous calls, as a job's own files
 * are (see controller/persistence.ts): a few kernel calls each, on a pseudo-filesystem.
 */
export async function createPodCgroups(
  layout: CgroupLayout,
  parentName: string,
  pod: string,
  limits: ResourceLimits,
  defaultPids: number,
): Promise<string[]> {
  const dirs: string[] = [];
  for (const h of layout.hierarchies) {
    const parent = join(h.root, parentName);
    const made = mkdirSync(parent, { recursive: true });
    // Its settings read once per parent folder this process made or found, not at every pod: a
    // folder made again (made !== undefined) takes them again.
    const key = `${h.root}\0${parentName}`;
    if (h.controllers.includes('cpuset') && (made !== undefined || !cpusetsInherited.has(key))) {
      inheritCpusets(h.root, parentName);
      cpusetsInherited.add(key);
    }
    if (h.version === 2 && h.controllers.length > 0) {
      const enable = h.controllers.map((c) => `+${c}`).join(' ');
      writeFileSync(join(h.root, 'cgroup.subtree_control'), enable);
      writeFileSync(join(parent, 'cgroup.subtree_control'), enable);
    }
    const dir = join(parent, pod);
    mkdirSync(dir, { recursive: true });
    writeLimits(h, dir, limits, defaultPids);
    dirs.push(dir);
  }
  return dirs;
}

/** The cpuset parents (hierarchy root and parent's name) whose settings inheritCpusets has set. */
const cpusetsInherited = new Set<string>();

/**
 * A v1 cpuset group starts with no CPUs and no memory nodes, and takes no process until it has
 * both: each folder of the instance's parent gets its parent's, and passes them on to the pods'
 * groups made in it (`cgroup.clone_children`).
 */
function inheritCpusets(root: string, parentName: string): void {
  const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8').trim();
  let above = root;
  for (const name of parentName.split('/').filter(Boolean)) {
    const dir = join(above, name);
    // Read first (a few bytes of a pseudo-file): set once, when the folder was made.
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (read(dir, file) === '') writeFileSync(join(dir, file), read(above, file));
    }
    if (read(dir, 'cgroup.clone_children') !== '1') writeFileSync(join(dir, 'cgroup.clone_children'), '1');
    above = dir;
  }
}

function writeLimits(h: Hierarchy, dir: string, limits: ResourceLimits, defaultPids: number) {
  const set = (file: string, value: string | number) => writeFileSync(join(dir, file), String(value));
  if (h.controllers.includes('memory') && limits.memoryBytes !== null) {
    if (h.version === 2) {
      set('memory.max', limits.memoryBytes);
      if (existsSync(join(dir, 'memory.swap.max'))) set('memory.swap.max', 0);
    } else {
      set('memory.limit_in_bytes', limits.memoryBytes);
      // memsw is memory plus swap: equal to the limit means no swap beyond it.
      if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) {
        set('memory.memsw.limit_in_bytes', limits.memoryBytes);
      }
    }
  }
  if (h.controllers.includes('cpu') && limits.cpuMillis !== null) {
    const quota = Math.max(1000, Math.round((limits.cpuMillis * CFS_PERIOD_US) / 1000));
    if (h.version === 2) set('cpu.max', `${quota} ${CFS_PERIOD_US}`);
    else {
      set('cpu.cfs_period_us', CFS_PERIOD_US);
      set('cpu.cfs_quota_us', quota);
    }
  }
  if (h.controllers.includes('pids')) set('pids.max', limits.pids ?? defaultPids);
}

/** How many times the kernel's OOM killer ended a process of the pod so far. */
export async function oomKillCount(layout: CgroupLayout, dirs: readonly string[]): Promise<number> {
  const index = layout.hierarchies.findIndex((h) => h.controllers.includes('memory'));
  const dir = dirs[index];
  if (index < 0 || !dir) return 0;
  const file = layout.hierarchies[index]!.version === 2 ? 'memory.events' : 'memory.oom_control';
  try {
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(join(dir, file), 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** Every process in the pod's cgroups. */
export async function cgroupPids(dirs: readonly string[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const dir of dirs) {
    try {
      for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) {
        if (line) pids.add(Number(line));
      }
    } catch {
      // Already removed.
    }
  }
  return [...pids];
}

/** Removes the pod's cgroups; their processes must be gone. */
export async function removePodCgroups(dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(`could not remove cgroup ${dir}: ${(error as Error).message}`);
      }
    }
  }
}

/** Removes the instance's folder of pod cgroups where no pod is left in it (running pods keep theirs). */
export async function removeCgroupParent(layout: CgroupLayout, parent: string): Promise<void> {
  for (const h of layout.hierarchies) await rmdir(join(h.root, parent)).catch(() => undefined);
}
