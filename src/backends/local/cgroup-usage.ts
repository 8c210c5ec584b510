import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CgroupLayout } from './cgroups.ts';
import type { PodUsage } from './runtime.ts';

// What a pod's processes use, read from its cgroups: the CPU time they have had so far (v2's
// cpu.stat, v1's cpuacct) and the memory they hold now, as the kubelet counts it (the working set:
// usage less the page cache the kernel may take back). Null where no hierarchy here counts it.

/** `key value` lines (cpu.stat, memory.stat) as a map. */
function statFields(text: string): Map<string, number> {
  const fields = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [key, value] = line.split(' ');
    if (key && value !== undefined) fields.set(key, Number(value));
  }
  return fields;
}

const read = (dir: string, file: string) => readFile(join(dir, file), 'utf8').catch(() => null);

/** The pod's usage; `dirs` are its cgroup folders, one per hierarchy of `layout`, in its order. */
export async function readPodUsage(layout: CgroupLayout, dirs: readonly string[]): Promise<PodUsage> {
  let cpuSeconds: number | null = null;
  let memoryBytes: number | null = null;
  await Promise.all(
    layout.hierarchies.map(async (h, i) => {
      const dir = dirs[i];
      if (dir === undefined) return; // a pod made before this hierarchy was used
      if (h.version === 2) {
        const stat = await read(dir, 'cpu.stat');
        const usec = stat === null ? undefined : statFields(stat).get('usage_usec');
        if (usec !== undefined) cpuSeconds = usec / 1e6;
      } else if (h.controllers.includes('cpuacct')) {
        const ns = await read(dir, 'cpuacct.usage');
        if (ns !== null) cpuSeconds = Number(ns) / 1e9;
      }
      if (h.controllers.includes('memory')) {
        const [usage, stat] = await Promise.all([
          read(dir, h.version === 2 ? 'memory.current' : 'memory.usage_in_bytes'),
          read(dir, 'memory.stat'),
        ]);
        if (usage === null) return;
        const inactive =
          stat === null
            ? 0
            : (statFields(stat).get(h.version === 2 ? 'inactive_file' : 'total_inactive_file') ?? 0);
        memoryBytes = Math.max(0, Number(usage) - inactive);
      }
    }),
  );
  return { cpuSeconds, memoryBytes };
}

/**
 * CPU in cores from readings of CPU time: each pod's rate since its reading before. A pod read
 * for the first time has no rate yet: `needsSecondReading` says so, and a second reading a moment
 * later gives it one.
 */
export function cpuRates() {
  const last = new Map<string, { seconds: number; at: number }>();
  return {
    /** The cores `key` used since its last reading (undefined for a first reading); remembers this one. */
    rate(key: string, seconds: number, at: number): number | undefined {
      const before = last.get(key);
      last.set(key, { seconds, at });
      if (before === undefined || at <= before.at) return undefined;
      return Math.max(0, (seconds - before.seconds) / ((at - before.at) / 1000));
    },
    /** Forgets every key but these (pods that ended). */
    keep(keys: ReadonlySet<string>): void {
      for (const key of last.keys()) if (!keys.has(key)) last.delete(key);
    },
  };
}
