import type { Clock, Timer } from '../model/clock.ts';
import type { Store, Transactional } from '../store/store.ts';
import type { Logger } from './log.ts';

// Leadership: of the replicas that share a store, the one that holds the lease runs the backend
// loop (as Kueue's and Armada's controllers run on a leader lease). It renews the lease well within
// its time; it stops leading when another holds it, or when it could not renew for the lease's
// time (its database unreachable: another may have taken over). What it writes while leading goes
// through the store fenced by its epoch, so a leader that was paused and resumes writes nothing.

export interface LeadershipOptions {
  store: Store;
  /** The lease's name: one per loop that must run once. */
  lease: string;
  /** This replica, as the lease names its holder: new at every start of the process. */
  holder: string;
  /** How long the lease lasts unless renewed: how long a crashed leader's loop stays without one. */
  ttlMs: number;
  /** How often it is renewed: well below `ttlMs`. */
  renewMs: number;
  /**
   * How often a replica that does not lead asks for it (`renewMs` by default): a crashed leader's
   * successor comes at most this long after its lease ran out. An ask that finds the lease held
   * is one statement that changes nothing.
   */
  retryMs?: number;
  clock: Clock;
  /**
   * Starts leading, writing through `fenced`; answers how to stop. `holds` answers, before each
   * act outside the store (on the cluster), whether this replica still leads: not once a write
   * was refused, nor once the lease's time ran out unrenewed on this replica's clock (a paused
   * process resumes acting on what it decided before the pause; this is what stops it).
   */
  lead(fenced: Transactional, epoch: number, holds: () => boolean): Promise<() => Promise<void>>;
  log?: Logger;
}

export type Leadership = ReturnType<typeof leadership>;

interface Leading {
  epoch: number;
  /** Deposed (a write refused, the lease run out): it acts no more, and steps down next. */
  deposed: boolean;
  /** The loop's start, under way or done. */
  started: Promise<void>;
  stop: () => Promise<void>;
}

export function leadership(o: LeadershipOptions) {
  let leading: Leading | undefined;
  /** When the lease was last held, on this replica's clock. */
  let heldAt = 0;
  /**
   * Until when the lease is surely held: its time counted from before the renewal was asked for
   * (the database counts it from when it answered, later).
   */
  let heldUntil = 0;
  let timer: Timer | undefined;
  let stopped = false;
  /** The pass under way: passes never overlap. */
  let pass: Promise<void> = Promise.resolve();

  async function stepDown(reason: string): Promise<void> {
    const was = leading;
    if (!was) return;
    leading = undefined;
    o.log?.warn({ lease: o.lease, epoch: was.epoch, reason }, 'no longer the leader');
    await was.started;
    await was.stop();
  }

  /**
   * Stops acting at once (`holds` answers false from now on), stepping down next: a write was
   * refused, or the lease ran out unrenewed — another replica may lead already.
   */
  function deposed(epoch: number, reason: string): void {
    if (leading?.epoch !== epoch || leading.deposed) return;
    leading.deposed = true;
    pass = pass.then(() => stepDown(reason));
  }

  const holds = (epoch: number) => () => {
    if (leading?.epoch !== epoch || leading.deposed) return false;
    if (o.clock.now() < heldUntil) return true;
    deposed(epoch, 'the lease ran out before it was renewed');
    return false;
  };

  async function once(): Promise<void> {
    try {
      const asked = o.clock.now();
      const lease = await o.store.leases.acquire(o.lease, o.holder, o.ttlMs);
      if (lease === undefined) return await stepDown('another replica holds the lease');
      heldAt = o.clock.now();
      heldUntil = asked + o.ttlMs;
      if (leading?.epoch === lease.epoch || stopped) return;
      // Taken after waiting longer than the lease lasts (a paused leader's transaction held its
      // row): surely held only from the next renewal.
      if (heldAt >= heldUntil) return;
      await stepDown('the lease has another epoch');
      const { epoch } = lease;
      const fence = {
        lease: o.lease,
        epoch,
        refused: () => deposed(epoch, 'a write was refused: another replica took the lease'),
      };
      o.log?.info({ lease: o.lease, epoch, holder: o.holder }, 'leading');
      // Leading (and so holding) while the loop starts, which acts as it catches up; started beside
      // the renewals, since catching up can take longer than the lease lasts.
      const now: Leading = { epoch, deposed: false, started: Promise.resolve(), stop: async () => {} };
      leading = now;
      now.started = o.lead(o.store.fenced(fence), epoch, holds(epoch)).then(
        (stop) => {
          now.stop = stop;
        },
        (err: unknown) => {
          o.log?.error({ err, lease: o.lease, epoch }, 'could not start leading; trying again');
          if (leading === now) leading = undefined;
        },
      );
    } catch (err) {
      o.log?.error({ err, lease: o.lease }, 'could not renew the lease');
      if (o.clock.now() - heldAt >= o.ttlMs) await stepDown('the lease could not be renewed in time');
    }
  }

  function tick(): void {
    pass = pass.then(once).finally(() => {
      if (!stopped) timer = o.clock.setTimeout(tick, leading ? o.renewMs : (o.retryMs ?? o.renewMs));
    });
  }

  return {
    start: tick,
    /** The epoch this replica leads with; undefined while it does not lead. */
    get epoch(): number | undefined {
      return leading?.epoch;
    },
    /** Stops leading and gives the lease up, so that another replica takes over at once. */
    async stop(): Promise<void> {
      stopped = true;
      timer?.cancel();
      await pass;
      const was = leading;
      await stepDown('stopping');
      if (was) await o.store.leases.release(o.lease, o.holder);
    },
  };
}
