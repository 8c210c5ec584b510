import { useEffect, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { StateBadge } from '../components/state-badge.tsx';
import { when } from '../format.ts';
import { followJob } from '../live.ts';
import { Link, navigate, queryOf } from '../router.tsx';
import { type AppSummary, FINAL_STATES, JOB_STATES, type Job } from '../types.ts';

const PAGE = 100;
/** Jobs followed live at once: one WebSocket each, newest first. */
const LIVE_AT_MOST = 25;

interface Page {
  items: Job[];
  next: string | null;
}

/** The caller's jobs, newest first, filtered by state and application; unfinished ones follow live. */
export function JobsPage() {
  const query = queryOf();
  const state = query.get('state') ?? '';
  const app = query.get('app') ?? '';
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [apps, setApps] = useState<AppSummary[]>([]);
  const [error, setError] = useState<string | null>(null);

  const load = (after?: string) =>
    getJson<Page>('/api/jobs/browse', {
      itemsPerPage: PAGE,
      next: after,
      filterState: state || undefined,
      filterApplication: app || undefined,
    });

  useEffect(() => {
    setJobs(null);
    load()
      .then((page) => {
        setJobs(page.items);
        setNext(page.next);
      })
      .catch((e: Error) => setError(e.message));
  }, [state, app]);
  useEffect(() => {
    getJson<{ items: AppSummary[] }>('/api/apps')
      .then((r) => setApps(r.items))
      .catch(() => {});
  }, []);

  // Live state: the unfinished jobs shown are followed; each update replaces the job's status.
  const unfinished = (jobs ?? [])
    .filter((j) => !FINAL_STATES.has(j.status.state))
    .slice(0, LIVE_AT_MOST)
    .map((j) => j.id);
  const key = unfinished.join(',');
  useEffect(() => {
    const stops = unfinished.map((id) =>
      followJob(id, (message) => {
        const status = message.initialJob?.status ?? message.newStatus;
        if (status === undefined) return;
        setJobs((current) => (current ?? []).map((j) => (j.id === id ? { ...j, status } : j)));
      }),
    );
    return () => {
      for (const stop of stops) stop();
    };
  }, [key]);

  const setFilter = (name: string, value: string) => {
    const q = queryOf();
    if (value === '') q.delete(name);
    else q.set(name, value);
    const text = q.toString();
    navigate(text === '' ? '/jobs' : `/jobs?${text}`, true);
  };

  return (
    <section>
      <h1>Jobs</h1>
      <div class="toolbar">
        <label>
          State{' '}
          <select value={state} onChange={(e) => setFilter('state', e.currentTarget.value)}>
            <option value="">All</option>
            {JOB_STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Application{' '}
          <select value={app} onChange={(e) => setFilter('app', e.currentTarget.value)}>
            <option value="">All</option>
            {apps.map((a) => (
              <option key={a.name} value={a.name}>
                {a.title}
              </option>
            ))}
          </select>
        </label>
      </div>
      {error !== null && <p class="error">{error}</p>}
      {jobs === null && error === null && <p class="loading">Loading…</p>}
      {jobs !== null && jobs.length === 0 && (
        <p>
          No jobs here yet. <Link href="/">Start one from the applications</Link>.
        </p>
      )}
      {jobs !== null && jobs.length > 0 && (
        <table class="jobs" aria-label="Jobs">
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Application</th>
              <th scope="col">State</th>
              <th scope="col" class="wide">
                Created
              </th>
              <th scope="col" class="wide">
                Machine
              </th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => (
              <tr key={j.id} data-job={j.id}>
                <td>
                  <Link href={`/jobs/${j.id}`}>{j.specification.name ?? j.id}</Link>
                </td>
                <td>{j.specification.application.name}</td>
                <td>
                  <StateBadge state={j.status.state} />
                </td>
                <td class="wide">{when(j.createdAt)}</td>
                <td class="wide">{j.specification.product.id}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next !== null && (
        <button
          type="button"
          onClick={() =>
            load(next)
              .then((page) => {
                setJobs([...(jobs ?? []), ...page.items]);
                setNext(page.next);
              })
              .catch((e: Error) => setError(e.message))
          }
        >
          Show more
        </button>
      )}
    </section>
  );
}
