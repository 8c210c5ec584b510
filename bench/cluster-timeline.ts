/**
 * What one side of bench/cluster.bench.ts saw of its jobs, and when (performance.now() ms): each
 * job's submission, its first pod seen Running, its Volcano Job seen Running, and its RUNNING (the
 * side's own criterion: the Volcano Job's phase for the direct side, ucompute's job state for
 * ucompute's). The stages between them say where time goes: the cluster (submit → pod Running),
 * Volcano's controller (pod Running → Volcano Job Running) and, for ucompute, ucompute itself
 * (Volcano Job Running → RUNNING as its API reports it).
 */

/** p50 and p99 of `values` (ms), and how many there were. */
function percentiles(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN);
  return { count: sorted.length, p50Ms: at(50), p99Ms: at(99) };
}

export class Timeline {
  readonly submitted = new Map<string, number>();
  readonly running = new Map<string, number>();
  /** First time a pod of the job was seen Running, by the job's key (the side's job name or id). */
  readonly podRunning = new Map<string, number>();
  /** First time the job's Volcano Job was seen in phase Running. */
  readonly volcanoRunning = new Map<string, number>();
  firstSubmit = 0;
  allSubmitted = 0;
  endedBy = 'all running';
  private resolveAll!: (why: string | undefined) => void;
  private readonly all = new Promise<string | undefined>((resolve) => {
    this.resolveAll = resolve;
  });
  readonly jobs: number;
  constructor(jobs: number) {
    this.jobs = jobs;
  }

  sawRunning(key: string): void {
    const at = this.submitted.get(key);
    if (at === undefined || this.running.has(key)) return;
    this.running.set(key, performance.now());
    if (this.running.size === this.jobs) this.resolveAll(undefined);
  }

  sawPodRunning(key: string): void {
    if (!this.podRunning.has(key)) this.podRunning.set(key, performance.now());
  }

  sawVolcanoRunning(key: string): void {
    if (!this.volcanoRunning.has(key)) this.volcanoRunning.set(key, performance.now());
  }

  /** The side cannot go on (a follower gave up): the wait ends with `why`. */
  fail(why: string): void {
    this.resolveAll(why);
  }

  /** Waits until all run, or until `stopped` (or a failure) says why not. */
  async untilAllRunning(stopped: Promise<string>): Promise<void> {
    const why = await Promise.race([this.all, stopped]);
    if (why !== undefined) this.endedBy = why;
  }

  /** One line of the progress report. */
  progress(): string {
    return `${this.submitted.size} submitted, ${this.podRunning.size} with a pod Running, ${this.volcanoRunning.size} Volcano Jobs Running, ${this.running.size} RUNNING`;
  }

  /** Milliseconds from `from` to `to` of the jobs both have. */
  private stage(from: Map<string, number>, to: Map<string, number>): number[] {
    const out: number[] = [];
    for (const [key, end] of to) {
      const start = from.get(key);
      if (start !== undefined) out.push(end - start);
    }
    return out;
  }

  summary() {
    const times = [...this.running.values()].sort((a, b) => a - b);
    const rate = (n: number, ms: number) => Math.round((n / (ms / 1000)) * 10) / 10;
    const tenth = Math.max(1, Math.floor(this.jobs / 10));
    // Each tenth of the N by the order they ran: when its last job ran (since the first
    // submission), and the jobs RUNNING per second within it, with that many jobs live (none ends).
    const byTenth: { running: number; afterMs: number; perSecond: number }[] = [];
    for (let end = tenth; end <= times.length; end += tenth) {
      const from = end === tenth ? this.firstSubmit : times[end - tenth - 1]!;
      byTenth.push({
        running: end,
        afterMs: Math.round(times[end - 1]! - this.firstSubmit),
        perSecond: rate(tenth, times[end - 1]! - from),
      });
    }
    const submitToRunning = percentiles(this.stage(this.submitted, this.running));
    return {
      endedBy: this.endedBy,
      submitted: this.submitted.size,
      submittedInMs: Math.round(this.allSubmitted - this.firstSubmit),
      running: times.length,
      // Over the jobs that reached RUNNING only (a partial run leaves the slowest out).
      p50Ms: submitToRunning.p50Ms,
      p99Ms: submitToRunning.p99Ms,
      runningPerSecond: rate(times.length, (times.at(-1) ?? NaN) - this.firstSubmit),
      byTenth,
      lastRunningAfterMs: Math.round((times.at(-1) ?? NaN) - this.firstSubmit),
      stages: {
        submitToPodRunning: percentiles(this.stage(this.submitted, this.podRunning)),
        podRunningToVolcanoRunning: percentiles(this.stage(this.podRunning, this.volcanoRunning)),
        volcanoRunningToRunning: percentiles(this.stage(this.volcanoRunning, this.running)),
      },
      podsRunningSeen: this.podRunning.size,
      volcanoJobsRunningSeen: this.volcanoRunning.size,
    };
  }
}
