import type { SQLInputValue } from 'node:sqlite';
import type { Store } from './store.ts';

// The live resource views' series: what each rank of a running job used, sample by sample. A
// rank keeps at most MAX_SAMPLES: beyond that its older half is thinned to every other sample, so
// a long job's series covers its whole life, the past at a coarser grain (as an RRD does).

type Row = Record<string, SQLInputValue>;

export interface ResourceSample {
  at: number;
  cpuCores?: number;
  memoryBytes?: number;
  gpuUtilization?: number;
  gpuMemoryBytes?: number;
}

export interface RankSamples {
  rank: number;
  samples: ResourceSample[];
}

export const MAX_SAMPLES = 720;

export type ResourceSeries = ReturnType<typeof resourceSeries>;

export function resourceSeries(store: Store) {
  const { db } = store;
  const insert = db.prepare(
    'insert or replace into resource_samples (job_id, rank, at, cpu, memory, gpu, gpu_memory) values (?, ?, ?, ?, ?, ?, ?)',
  );
  const count = db.prepare('select count(*) as n from resource_samples where job_id = ? and rank = ?');
  const thin = db.prepare(
    `delete from resource_samples where job_id = ? and rank = ? and at in (
       select at from (
         select at, row_number() over (order by at) as n from resource_samples where job_id = ? and rank = ?
       ) where n <= ? and n % 2 = 0
     )`,
  );
  const since = db.prepare('select * from resource_samples where job_id = ? and at > ? order by rank, at');
  const remove = db.prepare('delete from resource_samples where job_id = ?');
  const optional = (v: SQLInputValue | undefined) => (v === null || v === undefined ? undefined : Number(v));

  return {
    /** One sampling pass: each job's ranks at `at`, in one transaction. */
    append(
      at: number,
      jobs: ReadonlyMap<string, readonly (Omit<ResourceSample, 'at'> & { rank: number })[]>,
    ): void {
      store.transaction(() => {
        for (const [jobId, ranks] of jobs) {
          for (const r of ranks) {
            insert.run(
              jobId,
              r.rank,
              at,
              r.cpuCores ?? null,
              r.memoryBytes ?? null,
              r.gpuUtilization ?? null,
              r.gpuMemoryBytes ?? null,
            );
            const n = Number((count.get(jobId, r.rank) as Row).n);
            if (n > MAX_SAMPLES) thin.run(jobId, r.rank, jobId, r.rank, Math.floor(n / 2));
          }
        }
      });
    },

    /** A job's samples after `after` (epoch ms), per rank, oldest first. */
    of(jobId: string, after = 0): RankSamples[] {
      const ranks = new Map<number, ResourceSample[]>();
      for (const r of since.all(jobId, after) as Row[]) {
        const sample: ResourceSample = { at: Number(r.at) };
        const cpu = optional(r.cpu);
        const memory = optional(r.memory);
        const gpu = optional(r.gpu);
        const gpuMemory = optional(r.gpu_memory);
        if (cpu !== undefined) sample.cpuCores = cpu;
        if (memory !== undefined) sample.memoryBytes = memory;
        if (gpu !== undefined) sample.gpuUtilization = gpu;
        if (gpuMemory !== undefined) sample.gpuMemoryBytes = gpuMemory;
        const rank = Number(r.rank);
        const samples = ranks.get(rank);
        if (samples) samples.push(sample);
        else ranks.set(rank, [sample]);
      }
      return [...ranks].map(([rank, samples]) => ({ rank, samples }));
    },

    /** Forgets a job's series (it has ended and was cleaned up). */
    remove(jobId: string): void {
      remove.run(jobId);
    },
  };
}
