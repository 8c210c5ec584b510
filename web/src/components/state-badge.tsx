import { OUTCOME_LABEL, STATE_LABEL } from '../format.ts';
import type { Job } from '../types.ts';

/**
 * A job's state, or once it has ended, how it ended: "Cancelled", "Out of credits", "Failed", and
 * a completed job whose application exited non-zero as "Exit 1" (never a green badge for those).
 */
export function StateBadge({
  state,
  outcome,
  exitCode,
}: Pick<Job['status'], 'state' | 'outcome' | 'exitCode'>) {
  if (outcome === undefined) {
    return <span class={`state state-${state.toLowerCase()}`}>{STATE_LABEL[state] ?? state}</span>;
  }
  const failed = Object.values(exitCode ?? {}).filter((code) => code !== 0);
  const nonZero = outcome.kind === 'COMPLETED' && failed.length > 0;
  return (
    <span class={`state outcome-${nonZero ? 'exit' : outcome.kind.toLowerCase()}`} title={outcome.text}>
      {nonZero ? `Exit ${Math.max(...failed)}` : (OUTCOME_LABEL[outcome.kind] ?? outcome.kind)}
    </span>
  );
}
