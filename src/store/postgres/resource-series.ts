import { byRank, MAX_SAMPLES, type ResourceSeries, toSample } from '../resource-series.ts';
import type { Connection } from './database.ts';

const orNull = (v: unknown) => (v === null || v === undefined ? null : Number(v));

export function postgresResourceSeries({ query, atomic }: Connection): ResourceSeries {
  return {
    append(at, jobs) {
      return atomic(async (q) => {
        for (const [jobId, ranks] of jobs) {
          for (const r of ranks) {
            await q(
              `insert into resource_samples (job_id, rank, at, cpu, memory, gpu, gpu_memory) values (?, ?, ?, ?, ?, ?, ?)
               on conflict (job_id, rank, at) do update set cpu = excluded.cpu, memory = excluded.memory,
                 gpu = excluded.gpu, gpu_memory = excluded.gpu_memory`,
              jobId,
              r.rank,
              at,
              r.cpuCores ?? null,
              r.memoryBytes ?? null,
              r.gpuUtilization ?? null,
              r.gpuMemoryBytes ?? null,
            );
            const [count] = await q(
              'select count(*) as n from resource_samples where job_id = ? and rank = ?',
              jobId,
              r.rank,
            );
            const n = Number(count!.n);
            if (n <= MAX_SAMPLES) continue;
            await q(
              `delete from resource_samples where job_id = ? and rank = ? and at in (
                 select at from (
                   select at, row_number() over (order by at) as n from resource_samples where job_id = ? and rank = ?
                 ) numbered where n <= ? and n % 2 = 0
               )`,
              jobId,
              r.rank,
              jobId,
              r.rank,
              Math.floor(n / 2),
            );
          }
        }
      });
    },
    async of(jobId, after = 0) {
      const rows = await query(
        'select * from resource_samples where job_id = ? and at > ? order by rank, at',
        jobId,
        after,
      );
      return byRank(
        rows.map((r) => ({
          rank: Number(r.rank),
          sample: toSample(
            Number(r.at),
            orNull(r.cpu),
            orNull(r.memory),
            orNull(r.gpu),
            orNull(r.gpu_memory),
          ),
        })),
      );
    },
    async remove(jobIds) {
      if (jobIds.length > 0)
        await query('delete from resource_samples where job_id = any(?::text[])', jobIds);
    },
  };
}
