import type { OutboxEntry, OutboxKind, UcloudOutboxStore } from '../store/ucloud-outbox.ts';
import type { CoreClient } from './core-client.ts';
import { CoreCallError } from './core-client.ts';
import type { ChargeEntry, UsageEntry } from './outbox.ts';

// Delivery of the outbox to Core: oldest first, in batches, each batch one bulk call per run of
// entries of one kind, so that what happened to a job reaches Core in the order it happened. A
// call that fails (Core down, 5xx, a timeout) is tried again after a back-off that doubles up to
// a limit; nothing leaves the outbox before Core has answered it.
//
// Several calls are under way at once (`lanes`): each job belongs to one lane (by its id), and a
// lane sends its entries one call after another, so a job's entries are never in two calls at
// once and reach Core in order, while other jobs' go in the other lanes. Nothing is merged: Core
// keeps every update of a job as its history (core2 appends each to `job.Updates` and notifies
// each change of state, `core2/pkg/orchestrator/job.go` JobsControlAddUpdate), so a superseded
// update is still told.

/** Timers as delivery uses them: injected, so that tests drive back-offs without waiting. */
export interface DeliveryClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: DeliveryClock = {
  now: Date.now,
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface DeliveryOptions {
  outbox: UcloudOutboxStore;
  core: Pick<CoreClient, 'call'>;
  batchSize: number;
  /** Calls to Core under way at once, each for its own jobs; 1 when left out. */
  lanes?: number;
  clock?: DeliveryClock;
  /** First wait after a failed call; it doubles each time, up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Core said an owner has no credits left in a category. */
  outOfCredits(account: string, category: string): void;
  log?: { warn(obj: object, msg?: string): void };
  /** Told the age (ms) of each entry Core took, for the metrics. */
  delivered?: (entries: readonly OutboxEntry[], at: number) => void;
}

const PATHS: Record<OutboxKind, string> = {
  update: '/api/jobs/control/update',
  usage: '/api/accounting/v2/reportUsage',
  charge: '/api/jobs/control/chargeCredits',
};

/** Whether Core refused the call itself (it will refuse it again), rather than failing to answer it. */
const refusedForGood = (e: unknown): boolean =>
  e instanceof CoreCallError && e.status >= 400 && e.status < 500 && ![401, 408, 429].includes(e.status);

/** Consecutive entries of one kind, in order. */
export function runsOfOneKind(entries: readonly OutboxEntry[]): OutboxEntry[][] {
  const runs: OutboxEntry[][] = [];
  for (const entry of entries) {
    const last = runs.at(-1);
    if (last && last[0]!.kind === entry.kind) last.push(entry);
    else runs.push([entry]);
  }
  return runs;
}

/** The lane of a job: a hash of its id (FNV-1a), the same for every entry of the job. */
export function laneOf(jobId: string, lanes: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < jobId.length; i++) hash = Math.imul(hash ^ jobId.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % lanes;
}

/** The entries split by lane, each lane's in the order they came, without empty lanes. */
export function byLane(entries: readonly OutboxEntry[], lanes: number): OutboxEntry[][] {
  const split: OutboxEntry[][] = Array.from({ length: lanes }, () => []);
  for (const entry of entries) split[laneOf(entry.jobId, lanes)]!.push(entry);
  return split.filter((lane) => lane.length > 0);
}

export type Delivery = ReturnType<typeof outboxDelivery>;

export function outboxDelivery(o: DeliveryOptions) {
  const clock = o.clock ?? systemClock;
  const retryMs = o.retryMs ?? 1000;
  const maxRetryMs = o.maxRetryMs ?? 60_000;
  const lanes = o.lanes ?? 1;
  let failures = 0;
  let timer: unknown;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;

  /** Sends one run; answers what Core said about credits. */
  async function send(run: readonly OutboxEntry[]): Promise<void> {
    const kind = run[0]!.kind;
    const items = run.map((e) => (kind === 'update' ? e.body : (e.body as UsageEntry | ChargeEntry).request));
    const answer = await o.core.call<{
      responses?: unknown[];
      insufficientFunds?: { id: string }[];
    }>('POST', PATHS[kind], { items });
    if (kind === 'usage') {
      (answer.responses ?? []).forEach((ok, i) => {
        const entry = run[i]!.body as UsageEntry;
        if (ok === false) o.outOfCredits(entry.account, entry.category);
      });
    } else if (kind === 'charge') {
      const short = new Set((answer.insufficientFunds ?? []).map((f) => f.id));
      for (const e of run) {
        const entry = e.body as ChargeEntry;
        if (short.has(entry.request.id)) o.outOfCredits(entry.account, entry.category);
      }
    }
  }

  /** Sends a run; a run Core refuses is sent again entry by entry, and an entry it refuses is dropped. */
  async function deliver(run: readonly OutboxEntry[]): Promise<void> {
    try {
      await send(run);
    } catch (e) {
      if (!refusedForGood(e)) throw e;
      if (run.length === 1) {
        o.log?.warn({ err: e, entry: run[0] }, 'Core refused what it was told; it is not told again');
      } else {
        for (const entry of run) await deliver([entry]);
        return;
      }
    }
    await o.outbox.remove(run.map((e) => e.seq));
    o.delivered?.(run, clock.now());
  }

  /** One lane's entries, in calls of at most batchSize; stops at the first call that fails. */
  async function deliverLane(entries: readonly OutboxEntry[]): Promise<void> {
    for (let start = 0; start < entries.length && !stopped; start += o.batchSize) {
      for (const run of runsOfOneKind(entries.slice(start, start + o.batchSize))) await deliver(run);
    }
  }

  /**
   * Delivers the oldest entries, up to a batch per lane at a time, until none is left. A lane that
   * fails leaves its entries, and so every later entry of its jobs, for the next pass after the
   * back-off; the other lanes' calls finish first.
   */
  async function pass(): Promise<void> {
    for (;;) {
      const window = await o.outbox.oldest(o.batchSize * lanes);
      if (window.length === 0 || stopped) return;
      const outcomes = await Promise.allSettled(byLane(window, lanes).map(deliverLane));
      const failed = outcomes.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
  }

  function schedule(ms: number): void {
    if (stopped || timer !== undefined) return;
    timer = clock.setTimeout(() => {
      timer = undefined;
      kick();
    }, ms);
  }

  /** Delivers what is in the outbox now; a pass under way is followed by another. */
  function kick(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    if (timer !== undefined && failures > 0) return; // waiting out a back-off
    running = pass()
      .then(
        () => {
          failures = 0;
        },
        (err: unknown) => {
          failures++;
          const wait = Math.min(retryMs * 2 ** (failures - 1), maxRetryMs);
          o.log?.warn({ err, failures, retryInMs: wait }, 'telling Core failed; trying again');
          schedule(wait);
        },
      )
      .finally(() => {
        running = undefined;
        if (again && failures === 0) {
          again = false;
          kick();
        }
      });
  }

  return {
    kick,
    /** Failed calls in a row (0 when the last one went through). */
    failures: () => failures,
    /** Waits for the pass under way. */
    async idle(): Promise<void> {
      await running;
    },
    async stop(): Promise<void> {
      stopped = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      await running;
    },
  };
}
