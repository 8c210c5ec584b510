import { type Static, Type } from '@sinclair/typebox';
import { OUTCOME_KINDS } from './outcome-kinds.ts';
import { StringEnum } from './schema.ts';

/** How a final job ended (see outcome-kinds.ts). */
export const OutcomeKind = StringEnum(OUTCOME_KINDS);
export type OutcomeKind = Static<typeof OutcomeKind>;

/** An outcome as it is kept with the job. */
export interface Outcome {
  kind: OutcomeKind;
  /** Who cancelled the job. */
  by?: string;
  /** Why it failed, or what ended it before it started. */
  reason?: string;
}

/** The outcome as the API shows it (`status.outcome`, an addition to UCloud's shape). */
export const JobOutcome = Type.Object({
  kind: OutcomeKind,
  by: Type.Optional(Type.String({ description: 'who cancelled the job' })),
  reason: Type.Optional(Type.String({ description: 'why it failed, or what ended it before it started' })),
  text: Type.String({
    description: 'what happened, in a few words: "cancelled by alice", "completed (exit 1 on rank 0)"',
  }),
});
export type JobOutcome = Static<typeof JobOutcome>;

const MAX_CODES_SHOWN = 3;
const MAX_RANKS_SHOWN = 4;

function rankList(ranks: number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  const more = ranks.length > MAX_RANKS_SHOWN ? ` and ${ranks.length - MAX_RANKS_SHOWN} more` : '';
  return `ranks ${ranks.slice(0, MAX_RANKS_SHOWN).join(', ')}${more}`;
}

/** Non-zero exit codes grouped by code, in rank order: `exit 1 on rank 0`, `exit 2 on ranks 1, 3`. */
export function failedRanks(exitCodes: Record<string, number> | undefined): string | undefined {
  const byCode = new Map<number, number[]>();
  const ranks = Object.entries(exitCodes ?? {}).sort(([a], [b]) => Number(a) - Number(b));
  for (const [rank, code] of ranks) {
    if (code !== 0) byCode.set(code, [...(byCode.get(code) ?? []), Number(rank)]);
  }
  if (byCode.size === 0) return undefined;
  const shown = [...byCode].slice(0, MAX_CODES_SHOWN).map(([code, r]) => `exit ${code} on ${rankList(r)}`);
  return `${shown.join(', ')}${byCode.size > MAX_CODES_SHOWN ? ', ...' : ''}`;
}

/** The outcome in a few words, as the CLI, the API and the web interface show it. */
export function outcomeText(outcome: Outcome, exitCodes: Record<string, number> | undefined): string {
  switch (outcome.kind) {
    case 'COMPLETED': {
      const ranks = Object.keys(exitCodes ?? {}).length;
      const failed = failedRanks(exitCodes);
      if (failed !== undefined) return `completed (${failed})`;
      return ranks === 0
        ? 'completed'
        : ranks === 1
          ? 'completed (exit 0)'
          : 'completed (exit 0 on every rank)';
    }
    case 'CANCELLED':
      return outcome.by !== undefined ? `cancelled by ${outcome.by}` : 'cancelled';
    case 'OUT_OF_CREDITS':
      return 'stopped: out of credits';
    case 'EXPIRED':
      return 'expired: its time allocation ran out';
    case 'NEVER_STARTED':
      return `never started (${[outcome.reason, outcome.by && `by ${outcome.by}`].filter(Boolean).join(' ')})`;
    case 'FAILED':
      return `failed (${outcome.reason ?? 'no reason was given'})`;
  }
}

/** The outcome as the API shows it. */
export function presentOutcome(outcome: Outcome, exitCodes: Record<string, number> | undefined): JobOutcome {
  return { ...outcome, text: outcomeText(outcome, exitCodes) };
}
