import { useEffect, useRef, useState } from 'preact/hooks';
import { when } from '../format.ts';
import type { JobUpdate } from '../types.ts';
import { StateBadge } from './state-badge.tsx';

// A job's history on its page: the output of each rank, and its updates in order.

export function Logs({ logs, replicas }: { logs: Record<number, string>; replicas: number }) {
  const [rank, setRank] = useState(0);
  const pre = useRef<HTMLPreElement>(null);
  const text = logs[rank] ?? '';
  useEffect(() => {
    const el = pre.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <div class="logs">
      {replicas > 1 && (
        <div class="tabs" role="tablist" aria-label="Rank">
          {Array.from({ length: replicas }, (_, r) => (
            <button key={r} type="button" role="tab" aria-selected={r === rank} onClick={() => setRank(r)}>
              Rank {r}
            </button>
          ))}
        </div>
      )}
      <pre
        ref={pre}
        class="log"
        role="log"
        aria-live="off"
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling log must be reachable by keyboard
        tabIndex={0}
        aria-label={`Output of rank ${rank}`}
        data-rank={rank}
      >
        {text === '' ? 'No output yet.' : text}
      </pre>
    </div>
  );
}

export function Timeline({ updates }: { updates: JobUpdate[] }) {
  return (
    <ol class="timeline">
      {updates
        .filter((u) => u.state !== undefined || u.status !== undefined)
        .map((u, i) => (
          <li key={`${u.timestamp}-${i}`}>
            <time dateTime={new Date(u.timestamp).toISOString()}>{when(u.timestamp)}</time>
            {u.state !== undefined && <StateBadge state={u.state} />}
            {u.status !== undefined && <span>{u.status}</span>}
          </li>
        ))}
    </ol>
  );
}
