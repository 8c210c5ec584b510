import { availableParallelism, totalmem } from 'node:os';
import type { Backend, BackendEvent, LogChunk, Machines } from '../../jobs/backend.ts';
import { type Clock, systemClock, type Timer } from '../../model/clock.ts';

export interface DryOptions {
  /** How long a job "runs" before it succeeds; null keeps it running until cancelled. */
  runForMs?: number | null;
  /** What event times are read from and `runForMs` counts on; the machine's by default. */
  clock?: Clock;
}

interface DryJob {
  replicas: number;
  log: LogChunk[];
  ended: boolean;
  timer?: Timer;
  waiters: Set<() => void>;
}

/** Ended jobs whose logs are kept; older ones are forgotten, so memory stays bounded. */
const ENDED_KEPT = 10_000;

/**
 * Runs nothing: a job starts at once and succeeds with exit code 0 on every rank, after
 * `runForMs`. Each rank's log says what would have run. For tests, benchmarks and trying the API.
 * It keeps its jobs in memory only, so after a restart it knows none of them, and it keeps the
 * logs of the last ENDED_KEPT ended jobs.
 */
export function dryBackend(options: DryOptions = {}): Backend {
  const clock = options.clock ?? systemClock;
  const now = () => clock.now();
  const jobs = new Map<string, DryJob>();
  const listeners: ((e: BackendEvent) => void)[] = [];
  const emit = (e: BackendEvent) => {
    for (const l of listeners) l(e);
  };
  const ended = new Set<string>(); // in the order they ended
  const wake = (jobId: string, job: DryJob) => {
    for (const w of job.waiters) w();
    job.waiters.clear();
    ended.add(jobId);
    if (ended.size > ENDED_KEPT) {
      const oldest = ended.values().next().value!;
      ended.delete(oldest);
      jobs.delete(oldest);
    }
  };

  const finish = (jobId: string, job: DryJob) => {
    if (job.ended) return;
    job.ended = true;
    const exitCodes = Object.fromEntries(
      Array.from({ length: job.replicas }, (_, rank) => [String(rank), 0]),
    );
    emit({
      jobId,
      state: 'SUCCESS',
      status: 'The job finished (exit code 0 on every rank)',
      exitCodes,
      at: now(),
    });
    wake(jobId, job);
  };

  const machines: Machines = { total: { cpu: availableParallelism(), memory: totalmem() }, largest: null };
  return {
    name: 'dry',
    // Nothing runs, so no job is too large; but this machine is where it would. Read once: intake
    // asks at every request, and the two system calls were 1.2 % of a replica's busy CPU in ha.bench.
    machines: () => machines,
    async submit(jobId, build) {
      if (jobs.has(jobId)) return;
      const task = build.volcanoJob.spec.tasks[0];
      const replicas = task?.replicas ?? 1;
      const command = task?.template.spec.containers[0]?.command ?? [];
      const log = Array.from({ length: replicas }, (_, rank) => ({
        rank,
        stdout: `dry run, nothing executed: ${JSON.stringify(command)}\n`,
      }));
      const job: DryJob = { replicas, log, ended: false, waiters: new Set() };
      jobs.set(jobId, job);
      setImmediate(() => {
        emit({ jobId, state: 'RUNNING', status: 'The job is running', at: now() });
        const runFor = options.runForMs === undefined ? 0 : options.runForMs;
        if (runFor === null) return;
        if (runFor === 0) setImmediate(() => finish(jobId, job));
        else job.timer = clock.setTimeout(() => finish(jobId, job), runFor);
      });
    },
    async cancel(jobId) {
      const job = jobs.get(jobId);
      if (!job) return;
      job.timer?.cancel();
      if (job.ended) return;
      job.ended = true;
      wake(jobId, job);
    },
    async suspend(jobId) {
      const job = jobs.get(jobId);
      if (!job) return;
      job.timer?.cancel();
      job.ended = true;
      wake(jobId, job);
      // Forgotten, so that a submit runs it again.
      ended.delete(jobId);
      jobs.delete(jobId);
    },
    async extend() {
      // ucompute's own monitor enforces deadlines; nothing runs here to be told.
    },
    async knownJobs() {
      return new Set([...jobs].filter(([, j]) => !j.ended).map(([id]) => id));
    },
    onEvent(listener) {
      listeners.push(listener);
    },
    async *logs(jobId, { follow, signal }) {
      const job = jobs.get(jobId);
      if (!job) return;
      yield* job.log;
      while (follow && !job.ended && !signal?.aborted) {
        await new Promise<void>((resolve) => {
          job.waiters.add(resolve);
          signal?.addEventListener('abort', () => resolve(), { once: true });
        });
      }
    },
    async shell() {
      throw new Error('the dry backend runs no processes: there is no shell to open');
    },
    // It runs no processes: nothing uses anything.
    async usage() {
      return new Map();
    },
    async connect() {
      throw new Error('the dry backend runs no processes: there is no port to connect to');
    },
    async sshEndpoint() {
      throw new Error('the dry backend runs no processes: there is no sshd to reach');
    },
    async close() {
      for (const job of jobs.values()) {
        job.timer?.cancel();
        job.ended = true;
        for (const w of job.waiters) w();
      }
    },
  };
}
