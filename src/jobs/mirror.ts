import type { JobUpdate } from '../model/job.ts';
import type { Owner } from '../model/owner.ts';
import type { ChargeRecord } from '../store/accounting.ts';
import type { StoreParts } from '../store/store.ts';

/**
 * Another system that must learn of every change of every job (UCloud Core, in provider mode).
 * Each call happens inside the transaction that writes the change, and writes through that
 * transaction's parts (`tx`), so what it writes alongside (an outbox entry) is exactly as durable
 * as the change: never one without the other. It must not throw, and must not wait for anything
 * but its own writes: it only writes down what is to be told.
 */
export interface JobMirror {
  /** An update was applied to a job (its state, status, time allocation or output folder). */
  updateWritten(tx: StoreParts, jobId: string, update: JobUpdate): Promise<void>;
  /** A charge was recorded for a job; `totalCredits` is everything the job was charged so far. */
  chargeWritten(tx: StoreParts, charge: ChargeRecord, owner: Owner, totalCredits: number): Promise<void>;
}
