// Usage as people read it: credits charged, summed per owner, category and UTC day or hour.

export type UsageBucket = 'day' | 'hour';

const BUCKET_MILLIS: Record<UsageBucket, number> = { day: 86_400_000, hour: 3_600_000 };

export interface UsageCharge {
  category: string;
  chargedAt: number;
  credits: number;
}

export interface UsageSum {
  owner: string;
  category: string;
  /** Start of the bucket, epoch ms. */
  start: number;
  credits: number;
}

/** Sums each account's charges into buckets; sorted by owner, category, then time. */
export function usageBuckets(
  chargesByAccount: Iterable<readonly [account: string, charges: readonly UsageCharge[]]>,
  bucket: UsageBucket,
): UsageSum[] {
  const size = BUCKET_MILLIS[bucket];
  const sums = new Map<string, UsageSum>();
  for (const [account, charges] of chargesByAccount) {
    for (const c of charges) {
      const start = Math.floor(c.chargedAt / size) * size;
      const key = `${account}\u0000${c.category}\u0000${start}`;
      const sum = sums.get(key);
      if (sum) sum.credits += c.credits;
      else sums.set(key, { owner: account, category: c.category, start, credits: c.credits });
    }
  }
  return [...sums.values()].sort(
    (a, b) => a.owner.localeCompare(b.owner) || a.category.localeCompare(b.category) || a.start - b.start,
  );
}
