import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson, postJson } from '../api.ts';
import { span } from '../format.ts';
import { watchJobs } from '../live.ts';
import { Link } from '../router.tsx';
import { connectHref, isSessionApp, timeLeft } from '../sessions.ts';
import type { AppSummary, Job } from '../types.ts';
import { StateBadge } from './state-badge.tsx';

const ACTIVE = ['IN_QUEUE', 'RUNNING'] as const;
/** A session ending within this is shown as ending soon. */
const SOON_MS = 15 * 60_000;

/**
 * The user's interactive sessions as cards (Open OnDemand's "My Interactive Sessions"): the app,
 * its state, time left, Connect and a one-hour extension. Nothing when there is none.
 */
export function SessionCards() {
  const [jobs, setJobs] = useState<Job[]>([]);
  const [apps, setApps] = useState<Map<string, AppSummary>>(new Map());
  const [now, setNow] = useState(Date.now());
  const [notice, setNotice] = useState<string | null>(null);

  // Reads may answer out of order under load: an answer older than one shown is dropped.
  const reads = useRef({ asked: 0, shown: 0 });
  const read = () => {
    const asked = ++reads.current.asked;
    return Promise.all(
      ACTIVE.map((state) =>
        getJson<{ items: Job[] }>('/api/jobs/browse', { filterState: state, itemsPerPage: 100 }),
      ),
    )
      .then((pages) => {
        if (asked < reads.current.shown) return;
        reads.current.shown = asked;
        setJobs(pages.flatMap((p) => p.items));
      })
      .catch(() => {});
  };
  useEffect(() => {
    void getJson<{ items: AppSummary[] }>('/api/apps')
      .then((r) => setApps(new Map(r.items.map((a) => [a.name, a]))))
      .catch(() => {});
    void read();
    // A burst of changes (a gang of jobs starting) is read once, a moment after it began.
    let pending: ReturnType<typeof setTimeout> | undefined;
    const soon = () => {
      pending ??= setTimeout(() => {
        pending = undefined;
        void read();
      }, 300);
    };
    const stop = watchJobs(soon, soon);
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => {
      stop();
      clearTimeout(pending);
      clearInterval(tick);
    };
  }, []);

  const sessions = jobs.filter((j) => isSessionApp(apps.get(j.specification.application.name)));
  if (sessions.length === 0) return null;

  const extend = async (job: Job) => {
    try {
      await postJson('/api/jobs/extend', {
        items: [{ jobId: job.id, requestedTime: { hours: 1, minutes: 0, seconds: 0 } }],
      });
      setNotice(`${job.specification.name ?? job.id}: one more hour.`);
      await read();
    } catch (e) {
      setNotice(`Not extended: ${(e as Error).message}`);
    }
  };

  return (
    <section class="sessions" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Your sessions</h2>
      {notice !== null && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ul class="session-cards">
        {sessions.map((job) => {
          const app = apps.get(job.specification.application.name);
          const left = timeLeft(job, now);
          return (
            <li key={job.id} class="card session" data-job={job.id}>
              <h3>
                {app?.title ?? job.specification.application.name} <StateBadge state={job.status.state} />
              </h3>
              <p class="meta">
                <Link href={`/jobs/${job.id}`}>{job.specification.name ?? job.id}</Link>
                <span>{job.specification.product.id}</span>
              </p>
              <p class={`left${left !== undefined && left < SOON_MS ? ' soon' : ''}`}>
                {left === undefined
                  ? job.status.state === 'RUNNING'
                    ? 'No time limit'
                    : 'Waiting for a machine'
                  : `${span(left)} left`}
              </p>
              <div class="actions">
                <a class="button primary" href={connectHref(job)} target="_blank" rel="noopener">
                  Connect
                </a>
                {job.status.state === 'RUNNING' && left !== undefined && (
                  <button type="button" onClick={() => void extend(job)}>
                    +1 h
                  </button>
                )}
              </div>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
