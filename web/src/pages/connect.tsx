import { useEffect, useState } from 'preact/hooks';
import { getJson, postJson } from '../api.ts';
import { StateBadge } from '../components/state-badge.tsx';
import { Link } from '../router.tsx';
import type { JobState } from '../types.ts';

interface Readiness {
  state: JobState;
  ready: boolean;
  sessionType: 'WEB' | 'VNC' | 'SHELL';
  status?: string;
}

interface Opened {
  responses: {
    session:
      | { type: 'web'; redirectClientTo: string }
      | { type: 'vnc'; url: string }
      | { type: 'shell'; sessionIdentifier: string };
  }[];
}

const ENDED = new Set<JobState>(['SUCCESS', 'FAILURE', 'EXPIRED']);
/** Each wait asks the server to hold on this long for the app; a page waits at most an hour. */
const WAIT_MS = 10_000;
const MAX_WAITS = 360;

/** Where the opened session is shown: the app's own origin, the desktop page, or the terminal page. */
function destination(session: Opened['responses'][number]['session']): string {
  if (session.type === 'web') return session.redirectClientTo;
  if (session.type === 'vnc') return session.url;
  return `/sessions/shell#${session.sessionIdentifier}`;
}

/**
 * "Starting…": what Connect opens. It waits for the job to run and its app to answer (the server
 * probes it), then opens the session and goes there; a job that ends first says why.
 */
export function ConnectPage({ id, rank }: { id: string; rank: number }) {
  const [readiness, setReadiness] = useState<Readiness | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    (async () => {
      for (let wait = 0; wait < MAX_WAITS && !stopped; wait++) {
        const now = await getJson<Readiness>('/api/jobs/interactiveSession/ready', {
          id,
          rank,
          waitMs: WAIT_MS,
        });
        if (stopped) return;
        setReadiness(now);
        if (ENDED.has(now.state)) return;
        if (now.ready) {
          const opened = await postJson<Opened>('/api/jobs/interactiveSession', {
            items: [{ id, rank, sessionType: now.sessionType }],
          });
          location.replace(destination(opened.responses[0]!.session));
          return;
        }
      }
    })().catch((e: Error) => setError(e.message));
    return () => {
      stopped = true;
    };
  }, [id, rank]);

  const ended = readiness !== null && ENDED.has(readiness.state);
  const what =
    readiness?.sessionType === 'VNC' ? 'desktop' : readiness?.sessionType === 'SHELL' ? 'terminal' : 'app';
  return (
    <section class="connect" aria-busy={!ended && error === null}>
      <p class="crumbs">
        <Link href={`/jobs/${id}`}>Job {id}</Link>
      </p>
      {error !== null && <p class="error">{error}</p>}
      {error === null && !ended && (
        <>
          <h1>
            <span class="spinner" aria-hidden="true" /> Starting…
          </h1>
          <p role="status">
            {readiness === null
              ? 'Asking for the session…'
              : readiness.state === 'RUNNING'
                ? readiness.ready
                  ? `The ${what} answers: opening it.`
                  : `The job runs; waiting for its ${what} to answer.`
                : `Waiting for the job to start${readiness.status !== undefined ? `: ${readiness.status}` : '.'}`}
          </p>
          <p class="hint">This page goes on to the {what} by itself once it answers.</p>
        </>
      )}
      {ended && readiness !== null && (
        <>
          <h1>
            The job has ended <StateBadge state={readiness.state} />
          </h1>
          <p role="status">{readiness.status ?? 'It has no session to open any more.'}</p>
        </>
      )}
    </section>
  );
}
