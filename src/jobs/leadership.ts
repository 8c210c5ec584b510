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
  /** How often it is renewed (and, while another leads, asked for): well below `ttlMs`. */
  renewMs: number;
  clock: Clock;
  /** Starts leading, writing through `fenced`; answers how to stop. */
  lead(fenced: Transactional, epoch: number): Promise<() => Promise<void>>;
  log?: Logger;
}

export type Leadership = ReturnType<typeof leadership>;

export function leadership(o: LeadershipOptions) {
  let leading: { epoch: number; stop: () => Promise<void> } | undefined;
  /** When the lease was last held, on this replica's clock. */
  let heldAt = 0;
  let timer: Timer | undefined;
  let stopped = false;
  /** The pass under way: passes never overlap. */
  let pass: Promise<void> = Promise.resolve();

  async function stepDown(reason: string): Promise<void> {
    const was = leading;
    if (!was) return;
    leading = undefined;
    o.log?.warn({ lease: o.lease, epoch: was.epoch, reason }, 'no longer the leader');
    await was.stop();
  }

  async function once(): Promise<void> {
    try {
      const lease = await o.store.leases.acquire(o.lease, o.holder, o.ttlMs);
      if (lease === undefined) return await stepDown('another replica holds the lease');
      heldAt = o.clock.now();
      if (leading?.epoch === lease.epoch || stopped) return;
      await stepDown('the lease has another epoch');
      const stop = await o.lead(o.store.fenced({ lease: o.lease, epoch: lease.epoch }), lease.epoch);
      leading = { epoch: lease.epoch, stop };
      o.log?.info({ lease: o.lease, epoch: lease.epoch, holder: o.holder }, 'leading');
    } catch (err) {
      o.log?.error({ err, lease: o.lease }, 'could not renew the lease');
      if (o.clock.now() - heldAt >= o.ttlMs) await stepDown('the lease could not be renewed in time');
    }
  }

  function tick(): void {
    pass = pass.then(once).finally(() => {
      if (!stopped) timer = o.clock.setTimeout(tick, o.renewMs);
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
