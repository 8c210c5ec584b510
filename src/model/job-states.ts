/**
 * Every state of a job (UCloud's JobState), as plain data: the schema in job.ts is built from it,
 * and the web interface imports it without bringing the schemas into its bundle.
 */
export const JOB_STATES = [
  'IN_QUEUE',
  'RUNNING',
  'CANCELING',
  'SUCCESS',
  'FAILURE',
  'EXPIRED',
  'SUSPENDED',
] as const;
export type JobState = (typeof JOB_STATES)[number];

/** The states a job never leaves. */
export const FINAL_STATES: ReadonlySet<JobState> = new Set(['SUCCESS', 'FAILURE', 'EXPIRED']);
export function isFinal(state: JobState): boolean {
  return FINAL_STATES.has(state);
}
