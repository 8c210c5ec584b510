/**
 * How a final job ended, beside UCloud's state (which stays UCloud's: a cancelled job is SUCCESS),
 * as plain data: the schema in outcome.ts is built from it, and the web interface imports it
 * without bringing the schemas into its bundle.
 * COMPLETED: the application ran to its end (its exit codes per rank say how it went);
 * CANCELLED: a person cancelled it (`by`); OUT_OF_CREDITS: the platform stopped it because its
 * owner's credits ran out; EXPIRED: its time allocation ran out; NEVER_STARTED: it was cancelled or
 * stopped before it ever ran (`reason`, `by`); FAILED: the platform failed it (`reason`).
 */
export const OUTCOME_KINDS = [
  'COMPLETED',
  'CANCELLED',
  'OUT_OF_CREDITS',
  'EXPIRED',
  'NEVER_STARTED',
  'FAILED',
] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];
