// The live resource views' series: what each rank of a running job used, sample by sample. A
// rank keeps at most MAX_SAMPLES: beyond that its older half is thinned to every other sample, so
// a long job's series covers its whole life, the past at a coarser grain (as an RRD does).

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

export type RankUsage = Omit<ResourceSample, 'at'> & { rank: number };

export const MAX_SAMPLES = 720;

export interface ResourceSeries {
  /** One sampling pass: each job's ranks at `at`, in one transaction. */
  append(at: number, jobs: ReadonlyMap<string, readonly RankUsage[]>): Promise<void>;
  /** A job's samples after `after` (epoch ms), per rank, oldest first. */
  of(jobId: string, after?: number): Promise<RankSamples[]>;
  /** Forgets the series of jobs that have ended and were cleaned up (one statement on PostgreSQL). */
  remove(jobIds: readonly string[]): Promise<void>;
}

/** A sample row's measurements, the ones measured only. */
export function toSample(
  at: number,
  cpu: number | null,
  memory: number | null,
  gpu: number | null,
  gpuMemory: number | null,
): ResourceSample {
  const sample: ResourceSample = { at };
  if (cpu !== null) sample.cpuCores = cpu;
  if (memory !== null) sample.memoryBytes = memory;
  if (gpu !== null) sample.gpuUtilization = gpu;
  if (gpuMemory !== null) sample.gpuMemoryBytes = gpuMemory;
  return sample;
}

/** Samples in rank order, grouped by rank. */
export function byRank(rows: readonly { rank: number; sample: ResourceSample }[]): RankSamples[] {
  const ranks = new Map<number, ResourceSample[]>();
  for (const { rank, sample } of rows) {
    const samples = ranks.get(rank);
    if (samples) samples.push(sample);
    else ranks.set(rank, [sample]);
  }
  return [...ranks].map(([rank, samples]) => ({ rank, samples }));
}
