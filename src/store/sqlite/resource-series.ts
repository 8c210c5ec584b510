import type { SQLInputValue } from 'node:sqlite';
import { byRank, MAX_SAMPLES, type ResourceSeries, toSample } from '../resource-series.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

const orNull = (v: SQLInputValue | undefined) => (v === null || v === undefined ? null : Number(v));

export function sqliteResourceSeries({ sql, transaction }: SqliteDatabase): Synchronous<ResourceSeries> {
  return {
    append(at, jobs) {
      transaction(() => {
        for (const [jobId, ranks] of jobs) {
          for (const r of ranks) {
            sql(
              'insert or replace into resource_samples (job_id, rank, at, cpu, memory, gpu, gpu_memory) values (?, ?, ?, ?, ?, ?, ?)',
            ).run(
              jobId,
              r.rank,
              at,
              r.cpuCores ?? null,
              r.memoryBytes ?? null,
              r.gpuUtilization ?? null,
              r.gpuMemoryBytes ?? null,
            );
            const n = Number(
              (
                sql('select count(*) as n from resource_samples where job_id = ? and rank = ?').get(
                  jobId,
                  r.rank,
                ) as Row
              ).n,
            );
            if (n <= MAX_SAMPLES) continue;
            sql(
              `delete from resource_samples where job_id = ? and rank = ? and at in (
                 select at from (
                   select at, row_number() over (order by at) as n from resource_samples where job_id = ? and rank = ?
                 ) where n <= ? and n % 2 = 0
               )`,
            ).run(jobId, r.rank, jobId, r.rank, Math.floor(n / 2));
          }
        }
      });
    },
    of(jobId, after = 0) {
      const rows = sql('select * from resource_samples where job_id = ? and at > ? order by rank, at').all(
        jobId,
        after,
      ) as Row[];
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
    remove(jobIds) {
      for (const id of jobIds) sql('delete from resource_samples where job_id = ?').run(id);
    },
  };
}
