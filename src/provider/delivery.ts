import type { OutboxEntry, OutboxKind, UcloudOutboxStore } from '../store/ucloud-outbox.ts';
import type { CoreClient } from './core-client.ts';
import { CoreCallError } from './core-client.ts';
import type { ChargeEntry, UsageEntry } from './outbox.ts';

// Delivery of the outbox to Core: oldest first, in batches, each batch one bulk call per run of
// entries of one kind, so that what happened to a job reaches Core in the order it happened. A
// call that fails (Core down, 5xx, a timeout) is tried again after a back-off that doubles up to
// a limit; nothing leaves the outbox before Core has answered it.

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

export type Delivery = ReturnType<typeof outboxDelivery>;

export function outboxDelivery(o: DeliveryOptions) {
  const clock = o.clock ?? systemClock;
  const retryMs = o.retryMs ?? 1000;
  const maxRetryMs = o.maxRetryMs ?? 60_000;
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

  async function pass(): Promise<void> {
    for (;;) {
      const batch = await o.outbox.oldest(o.batchSize);
      if (batch.length === 0 || stopped) return;
      for (const run of runsOfOneKind(batch)) await deliver(run);
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
