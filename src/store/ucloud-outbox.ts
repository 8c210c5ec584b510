/** What Core is told: a job's update (`jobs/control/update`), its usage, or a legacy charge. */
export type OutboxKind = 'update' | 'usage' | 'charge';

export interface OutboxEntry {
  /** The order things happened in: Core is told them in this order. */
  seq: number;
  kind: OutboxKind;
  jobId: string;
  body: unknown;
  createdAt: number;
}

/**
 * The provider's outbox, in the service's database: what UCloud Core must be told, kept until Core
 * took it. An entry is added in the transaction that writes what it tells (so neither is ever
 * without the other) and removed only once Core answered it.
 */
export interface UcloudOutboxStore {
  /** Adds an entry; inside the caller's transaction when there is one. */
  add(kind: OutboxKind, jobId: string, body: unknown, at: number): Promise<void>;
  /** The `limit` oldest entries, oldest first. */
  oldest(limit: number): Promise<OutboxEntry[]>;
  /** Removes entries Core has taken. */
  remove(seqs: readonly number[]): Promise<void>;
  size(): Promise<number>;
}
