import type { RankUsage } from '../../jobs/backend.ts';
import { isFinalPhase } from '../../volcano/api/phases.ts';
import { cpuRates } from './cgroup-usage.ts';
import type { JobRun } from './controller/job-run.ts';
import type { Pod } from './runtime.ts';

/** A pod read for the first time is read again this much later, for its CPU rate. */
const SECOND_READING_MS = 250;

/**
 * What the ranks of running jobs use, from their pods' cgroups: memory as read, CPU as the rate
 * since the pod's last reading (a pod's first call reads it twice, a moment apart).
 */
export function localJobUsage(runs: ReadonlyMap<string, JobRun>, now: () => number = Date.now) {
  const rates = cpuRates();

  async function readRank(key: string, rank: number, pod: Pod): Promise<RankUsage & { fresh: boolean }> {
    const reading = await pod.usage();
    const cores = reading.cpuSeconds === null ? undefined : rates.rate(key, reading.cpuSeconds, now());
    return {
      rank,
      ...(cores !== undefined ? { cpuCores: cores } : {}),
      ...(reading.memoryBytes !== null ? { memoryBytes: reading.memoryBytes } : {}),
      fresh: cores === undefined && reading.cpuSeconds !== null,
    };
  }

  return async (jobIds: readonly string[]): Promise<Map<string, RankUsage[]>> => {
    const pods: { jobId: string; key: string; rank: number; pod: Pod }[] = [];
    for (const jobId of jobIds) {
      const run = runs.get(jobId);
      if (!run || isFinalPhase(run.phase)) continue;
      for (const [name, record] of run.pods) {
        if (record.pod && record.phase === 'Running')
          pods.push({ jobId, key: `${jobId}/${name}`, rank: record.plan.rank, pod: record.pod });
      }
    }
    rates.keep(new Set(pods.map((p) => p.key)));
    let read = await Promise.all(pods.map((p) => readRank(p.key, p.rank, p.pod).catch(() => undefined)));
    if (read.some((r) => r?.fresh)) {
      await new Promise((resolve) => setTimeout(resolve, SECOND_READING_MS));
      read = await Promise.all(
        pods.map((p, i) =>
          read[i]?.fresh ? readRank(p.key, p.rank, p.pod).catch(() => undefined) : read[i],
        ),
      );
    }
    const byJob = new Map<string, RankUsage[]>();
    pods.forEach((p, i) => {
      const usage = read[i];
      if (usage === undefined) return; // its pod went meanwhile
      const { fresh: _fresh, ...rank } = usage;
      byJob.set(
        p.jobId,
        [...(byJob.get(p.jobId) ?? []), rank].sort((a, b) => a.rank - b.rank),
      );
    });
    return byJob;
  };
}
