import type { AccountingStore } from './accounting.ts';
import type { AuditLog } from './audit-log.ts';
import type { Directory } from './directory.ts';
import type { JobEventLog, OnJobEvents } from './job-events.ts';
import type { JobStore } from './jobs.ts';
import type { Fence, LeaseStore } from './leases.ts';
import type { ResourceSeries } from './resource-series.ts';
import type { SessionStore, SignInStore } from './sessions.ts';
import type { SshKeyStore } from './ssh-keys.ts';
import type { UcloudApplicationStore } from './ucloud-applications.ts';
import type { UcloudOutboxStore } from './ucloud-outbox.ts';
import type { UserStore } from './users.ts';

/** The store's parts, one per concern; every method answers a Promise. */
export interface StoreParts {
  jobs: JobStore;
  /** Every change of a job, numbered in the order of commit (job-events.ts). */
  jobEvents: JobEventLog;
  accounting: AccountingStore;
  users: UserStore;
  sessions: SessionStore;
  signIns: SignInStore;
  sshKeys: SshKeyStore;
  /** Users, projects and tokens as administrators list and change them. */
  directory: Directory;
  audit: AuditLog;
  resourceSeries: ResourceSeries;
  /** Provider mode: what UCloud Core must be told, and the applications it resolved. */
  ucloudOutbox: UcloudOutboxStore;
  ucloudApplications: UcloudApplicationStore;
  /** Which replica leads, and the epoch that fences a deposed leader's writes. */
  leases: LeaseStore;
}

export interface TransactionOptions {
  /** Synced to disk before it returns (accepting jobs); the others may wait for the next sync. */
  durable?: boolean;
  /**
   * Returns only once the durable transactions whose rows it read are on disk: for one whose rows
   * go outside the database next (the jobs the backend gets). PostgreSQL shows a durable
   * transaction's rows from its commit on, before the sync it answers after
   * (postgres/transaction.ts), and syncs this one as a durable one; SQLite shows them once synced.
   */
  afterDurable?: boolean;
}

/**
 * The durable store. Every write is a transaction; several writes that must happen together go
 * through `transaction`, whose callback uses the parts it is handed (`tx`), never the store's own
 * (they would wait for the transaction to end, or write outside it). A nested transaction is
 * part of the one around it.
 */
export interface Store extends Transactional {
  /**
   * The store as a leader writes it: each of its transactions, and each call of its parts that
   * writes (then a transaction of its own; on PostgreSQL a read outside a transaction is not
   * fenced: it changes nothing), first checks that `fence.lease` still has `fence.epoch` — on
   * PostgreSQL holding that row shared until it ends, so that a takeover commits after it — and is
   * otherwise refused with FencedError, having written nothing.
   */
  fenced(fence: Fence): Transactional;
  /** Tells a listener after job events were written (by this process; on PostgreSQL, by any). */
  onJobEvents: OnJobEvents;
  close(): Promise<void>;
}

/** The parts, and transactions over them. */
export interface Transactional extends StoreParts {
  transaction<T>(fn: (tx: StoreParts) => Promise<T>, options?: TransactionOptions): Promise<T>;
}
