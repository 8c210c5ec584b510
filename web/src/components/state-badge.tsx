import { STATE_LABEL } from '../format.ts';
import type { JobState } from '../types.ts';

export function StateBadge({ state }: { state: JobState }) {
  return <span class={`state state-${state.toLowerCase()}`}>{STATE_LABEL[state] ?? state}</span>;
}
