// Leases: which replica leads (runs the backend loop), and the fencing token that stops a deposed
// leader from writing. A lease is a row: its holder, its epoch (raised at every change of holder)
// and when it expires unless renewed.

/** The lease whose holder runs the backend loop (and the other work done once, not per replica). */
export const BACKEND_LEASE = 'backend';

export interface Lease {
  name: string;
  /** The replica that holds it: an id of the process, new at every start. */
  holder: string;
  /** Raised whenever another holder takes the lease: the fencing token. */
  epoch: number;
  /** Epoch milliseconds, on the database's clock where it has one (PostgreSQL). */
  expiresAt: number;
}

/** What a leader's writes are checked against: the lease still has this epoch. */
export interface Fence {
  lease: string;
  epoch: number;
  /** Told of each refused write: the first tells a leader that it was deposed, before its next renewal. */
  refused?(error: FencedError): void;
}

/** A write refused because the lease it was fenced by has another epoch: its leader was deposed. */
export class FencedError extends Error {
  constructor(fence: Fence, current: number | undefined) {
    super(
      `refused: lease ${fence.lease} has epoch ${current ?? 'none'}, not ${fence.epoch} (another replica leads)`,
    );
    this.name = 'FencedError';
  }
}

/** Refuses a fenced write unless the lease still has the fence's epoch (telling the fence's holder). */
export function checkEpoch(fence: Fence, current: number | undefined): void {
  if (current === fence.epoch) return;
  const error = new FencedError(fence, current);
  fence.refused?.(error);
  throw error;
}

export interface LeaseStore {
  /**
   * Takes the lease for `holder` when it is free or expired (the epoch raised when the holder
   * changes), or renews it when `holder` has it; answers the lease then, or undefined while
   * another holds it.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<Lease | undefined>;
  /** Gives the lease up at once (a clean stop), so that another need not wait out its time. */
  release(name: string, holder: string): Promise<void>;
  current(name: string): Promise<Lease | undefined>;
}
