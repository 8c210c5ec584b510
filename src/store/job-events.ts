import type { JobUpdate } from '../model/job.ts';

// Job events: every change of a job (created, updated, renamed) is recorded in the transaction
// that makes it, under a sequence number that orders the commits of every replica. Whoever tells
// clients of changes reads them from here, on any replica: a client that saw event n resumes
// after n wherever it reconnects.

/** One change of a job. */
export interface JobEventRow {
  seq: number;
  jobId: string;
  /** The update written; null when the job was renamed. */
  update: JobUpdate | null;
}

export interface JobEventLog {
  /** The events after `seq`, in order, at most `limit`. */
  after(seq: number, limit: number): Promise<JobEventRow[]>;
  /**
   * The jobs created by the events numbered after `after` up to `upTo`, in their order: what a
   * leader adopts as other replicas accept them (submission leaves out those submitted or ended
   * since, as it does any job it is asked for).
   */
  created(after: number, upTo: number): Promise<string[]>;
  /** The oldest and newest event kept (0 and 0 when there is none). */
  bounds(): Promise<{ oldest: number; newest: number }>;
  /** Forgets all but the newest `keep` events; answers how many were forgotten. */
  prune(keep: number): Promise<number>;
}

/**
 * Tells `listener` after events were written, with the newest one's number when it is known: on
 * SQLite after this process's commits, on PostgreSQL after any replica's (LISTEN/NOTIFY, and
 * with no number after the notifications' connection was lost and made again). Answers the
 * function that stops it.
 */
export type OnJobEvents = (listener: (newest?: number) => void) => () => void;
