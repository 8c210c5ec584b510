import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { leadership } from '../jobs/leadership.ts';
import { systemClock } from '../model/clock.ts';
import { BACKEND_LEASE } from '../store/leases.ts';
import type { Store, Transactional } from '../store/store.ts';

/**
 * client-go's leader election's lease and renewal period; replicas that do not lead ask every
 * quarter second (client-go: every 2 s), so a crashed leader is replaced within about 15 s of its
 * last renewal, not 17.
 */
export const DEFAULT_LEASE_SECONDS = 15;
export const DEFAULT_RENEW_SECONDS = 2;
const FOLLOWER_RETRY_MS = 250;

export interface ReplicaLeadershipOptions {
  store: Store;
  leaseMs: number;
  renewMs: number;
  log: Logger;
  /**
   * Starts the leader's work, writing through `loopStore` and acting on the cluster only while
   * `holds()`; answers how to stop it.
   */
  lead(loopStore: Transactional, holds: () => boolean): Promise<() => Promise<void>>;
  /**
   * This replica led and lost the lease (another took over, or it could not renew in time): it
   * exits, as a client-go controller does, and comes back as a follower.
   */
  lost(): void;
}

/**
 * `ucompute serve` on PostgreSQL: every replica serves; the one that holds the backend lease runs
 * the backend loop through the store fenced by its epoch.
 */
export function replicaLeadership(o: ReplicaLeadershipOptions) {
  let stopping = false;
  const elected = leadership({
    store: o.store,
    lease: BACKEND_LEASE,
    holder: `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
    ttlMs: o.leaseMs,
    renewMs: o.renewMs,
    retryMs: Math.min(o.renewMs, FOLLOWER_RETRY_MS),
    clock: systemClock,
    log: o.log,
    async lead(fenced, _epoch, holds) {
      const stop = await o.lead(fenced, holds);
      return async () => {
        await stop();
        if (!stopping) o.lost();
      };
    },
  });
  return {
    start: elected.start,
    async stop(): Promise<void> {
      stopping = true;
      await elected.stop();
    },
  };
}
