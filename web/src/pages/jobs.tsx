import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { Options } from '../components/options.tsx';
import { SessionCards } from '../components/session-cards.tsx';
import { StateBadge } from '../components/state-badge.tsx';
import { OUTCOME_LABEL, span, waitingNotice, when } from '../format.ts';
import { type ListFilter, listFollower, type Shown } from '../job-list.ts';
import { watchJobs } from '../live.ts';
import { Link, navigate, queryOf } from '../router.tsx';
import { connectHref, isSessionApp, timeLeft } from '../sessions.ts';
import { type AppSummary, FINAL_STATES, JOB_STATES, type Job, OUTCOME_KINDS } from '../types.ts';
import { workspace } from '../workspace.ts';

/** Rows per page: a laptop screen's worth and some; "Show more" reads the next. */
const PAGE = 50;

interface Page {
  items: Job[];
  next: string | null;
}

const browse = (filter: ListFilter, after?: string) =>
  getJson<Page>('/api/jobs/browse', {
    itemsPerPage: PAGE,
    next: after,
    filterState: filter.state || undefined,
    filterOutcome: filter.outcome || undefined,
    filterApplication: filter.app || undefined,
  });

/**
 * The unfiltered first page, asked for as the app starts on /jobs, alongside the session rather
 * than after it: the rows are the first thing the page shows. Undefined when that read failed
 * (not signed in yet): the page reads again.
 */
let startingPage: Promise<Page | undefined> | undefined =
  location.pathname === '/jobs' && location.search === ''
    ? browse({ state: '', outcome: '', app: '', project: workspace.value }).catch(() => undefined)
    : undefined;

/** The caller's jobs, newest first, filtered by state, outcome and application; every change pushed live. */
export function JobsPage() {
  const query = queryOf();
  const state = query.get('state') ?? '';
  const outcome = query.get('outcome') ?? '';
  const app = query.get('app') ?? '';
  const [jobs, setJobs] = useState<readonly Job[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [apps, setApps] = useState<AppSummary[]>([]);
  const [error, setError] = useState<string | null>(null);
  // The list's follower, which "Show more" adds the next page to.
  const follower = useRef<ReturnType<typeof listFollower> | null>(null);
  const show = (shown: Shown) => {
    setJobs(shown.jobs);
    setNext(shown.next);
  };

  // One stream for every job; each read of the first page gets the changes seen meanwhile on top.
  useEffect(() => {
    const filter = { state, outcome, app, project: workspace.value };
    const list = listFollower(filter, show);
    follower.current = list;
    let current = true;
    const read = (page: Promise<Page>) => {
      const answered = list.reading();
      page
        .then((p) => (current ? answered(p) : answered(null)))
        .catch((e: Error) => {
          answered(null);
          setError(e.message);
        });
    };
    const stop = watchJobs(list.changed, () => read(browse(filter)));
    show({ jobs: null, next: null });
    const started = state === '' && outcome === '' && app === '' ? startingPage : undefined;
    startingPage = undefined;
    read(started ? started.then((page) => page ?? browse(filter)) : browse(filter));
    return () => {
      current = false;
      stop();
    };
  }, [state, outcome, app]);

  // The filter's applications (and which are sessions): secondary, read once the rows are there.
  const listed = jobs !== null;
  useEffect(() => {
    if (!listed || apps.length > 0) return;
    getJson<{ items: AppSummary[] }>('/api/apps')
      .then((r) => setApps(r.items))
      .catch(() => {});
  }, [listed]);
  // Time left counts down.
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(tick);
  }, []);
  const session = (job: Job) =>
    job.status.state === 'RUNNING' &&
    isSessionApp(apps.find((a) => a.name === job.specification.application.name));

  const setFilter = (name: string, value: string) => {
    const q = queryOf();
    if (value === '') q.delete(name);
    else q.set(name, value);
    const text = q.toString();
    navigate(text === '' ? '/jobs' : `/jobs?${text}`, true);
  };

  return (
    <section>
      <SessionCards />
      <h1>Jobs</h1>
      <div class="toolbar">
        <label>
          State{' '}
          <select value={state} onChange={(e) => setFilter('state', e.currentTarget.value)}>
            <option value="">All</option>
            <Options values={JOB_STATES} />
          </select>
        </label>
        <label>
          Outcome{' '}
          <select value={outcome} onChange={(e) => setFilter('outcome', e.currentTarget.value)}>
            <option value="">Any</option>
            {OUTCOME_KINDS.map((kind) => (
              <option key={kind} value={kind}>
                {OUTCOME_LABEL[kind]}
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
              <th scope="col">Time left</th>
              <th scope="col" class="wide">
                Owner
              </th>
              <th scope="col" class="wide">
                Created
              </th>
              <th scope="col" class="wide">
                Machine
              </th>
              <th scope="col">
                <span class="visually-hidden">Connect</span>
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
                  <StateBadge {...j.status} />
                  {reasonOf(j) !== undefined && (
                    <span class="reason" title={reasonOf(j)}>
                      {reasonOf(j)}
                    </span>
                  )}
                </td>
                <td>{leftText(j, now)}</td>
                <td class="wide">
                  {j.owner.createdBy}
                  {j.owner.project !== undefined && <span class="muted"> in {j.owner.project}</span>}
                </td>
                <td class="wide">{when(j.createdAt)}</td>
                <td class="wide">{j.specification.product.id}</td>
                <td>
                  {session(j) && (
                    <a class="button small primary" href={connectHref(j)} target="_blank" rel="noopener">
                      Connect
                    </a>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next !== null && (
        <button
          type="button"
          onClick={() =>
            browse({ state, outcome, app, project: workspace.value }, next)
              .then((page) => follower.current?.more(page))
              .catch((e: Error) => setError(e.message))
          }
        >
          Show more
        </button>
      )}
    </section>
  );
}

/** Time before the job's limit while it is active; '-' otherwise. */
function leftText(job: Job, now: number): string {
  const left = timeLeft(job, now);
  return left === undefined || FINAL_STATES.has(job.status.state) ? '-' : span(left);
}

/**
 * Beside the badge: how an ended job ended, or why a waiting one waits (its place in the queue, who
 * suspended it, a hold for its owner's storage quota), as its page says.
 */
function reasonOf(job: Job): string | undefined {
  return job.status.outcome?.text ?? waitingNotice(job);
}
