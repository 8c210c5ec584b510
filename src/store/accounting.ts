// Allocations of credits and the charges drawn from them.

export interface ChargeRecord {
  chargeId: string;
  jobId: string;
  owner: string;
  category: string;
  units: number;
  periods: number;
  credits: number;
  chargedAt: number;
}

export interface AllocationRecord {
  id: number;
  owner: string;
  category: string;
  credits: number;
  used: number;
  startAt: number;
  endAt: number;
}

export interface AccountingStore {
  /** Grants credits to an owner in a category for [startAt, endAt); answers the allocation's id. */
  grant(
    owner: string,
    category: string,
    credits: number,
    startAt: number,
    endAt: number,
    now?: number,
  ): Promise<number>;
  /** Every allocation, or an owner's, in the order they were granted. */
  allocations(owner?: string): Promise<AllocationRecord[]>;
  /** Allocations of an owner in a category that are valid at `at`, the soonest to end first. */
  activeAllocations(owner: string, category: string, at: number): Promise<AllocationRecord[]>;
  /**
   * What intake reads of each owner's credits in a category, for several at once: its allocations
   * valid at `at` (as activeAllocations; inside a transaction on PostgreSQL locked until its end,
   * all in one order) and what its active jobs hold back (as JobStore.foldHeldCredits, folded as it
   * folds), by `creditKey(owner, category)`. On PostgreSQL one round trip for them all, the held
   * credits read once the allocations are locked; inside a transaction that has not begun, the
   * transaction's begin goes with it.
   */
  creditReads(
    pairs: readonly { owner: string; category: string }[],
    at: number,
  ): Promise<Map<string, { allocations: AllocationRecord[]; held: number }>>;
  /**
   * Records a charge once (false when this charge id was already recorded: a retry) and draws it
   * from the owner's valid allocations, the soonest to end first; what none can cover is
   * drawn from the last one, which then shows a negative balance. Atomic on its own.
   */
  charge(c: ChargeRecord): Promise<boolean>;
  /**
   * Records charges of distinct jobs as `charge` does each, atomically; answers the ids of those
   * recorded. On PostgreSQL one statement records them all, one per owner and category reads
   * (and locks) the allocations they draw on, one more draws on those.
   */
  chargeMany(cs: readonly ChargeRecord[]): Promise<Set<string>>;
  /** An owner's charges in [from, to), oldest first. */
  charges(owner: string, from: number, to: number): Promise<ChargeRecord[]>;
}

/** The key of an owner's credits in a category in AccountingStore.creditReads' answer. */
export const creditKey = (owner: string, category: string) => `${owner}\n${category}`;
