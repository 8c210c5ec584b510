import { lazy, Suspense } from 'preact/compat';
import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson, postJson } from '../api.ts';
import { Cancel, Extend, OutputFiles, SuspendResume } from '../components/job-actions.tsx';
import { Logs, Timeline } from '../components/job-history.tsx';
import { StateBadge } from '../components/state-badge.tsx';
import { credits, span, waitingNotice, when } from '../format.ts';
import { followJob } from '../live.ts';
import { Link } from '../router.tsx';
import { connectHref } from '../sessions.ts';
import { FINAL_STATES, type Job, type ParameterValue, type Utilization } from '../types.ts';

// xterm.js loads only when a terminal is opened; web apps and desktops open in a tab of their own.
const JobTerminal = lazy(() => import('./terminal.tsx').then((m) => ({ default: m.JobTerminal })));
// The resource charts (uPlot) load with a running job's page.
const ResourceCharts = lazy(() => import('./resources.tsx').then((m) => ({ default: m.ResourceCharts })));
/** A running job whose time runs out within this says so at the top of its page. */
const WARN_BEFORE_MS = 15 * 60_000;

/** Log text kept per rank: the newest part of a long log. */
const LOG_KEPT = 512 * 1024;

/** The terminal open on the page, if any. */
type Opened = { sessionIdentifier: string } | null;

function shown(value: ParameterValue): preact.ComponentChild {
  switch (value.type) {
    case 'workflow':
      return <pre>{value.specification.job ?? ''}</pre>;
    case 'file':
      return value.path;
    case 'peer':
      return `${value.jobId} as ${value.hostname}`;
    case 'license_server':
    case 'network':
    case 'ingress':
      return value.id;
    default:
      return String(value.value);
  }
}

/** A job: state timeline, logs per rank, its sessions, extend, suspend/resume and cancel, output files, parameters and cost. */
export function JobPage({ id }: { id: string }) {
  const [job, setJob] = useState<Job | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [logs, setLogs] = useState<Record<number, string>>({});
  const [logsGone, setLogsGone] = useState<string | null>(null);
  const [rank, setRank] = useState(0);
  const [opened, setOpened] = useState<Opened>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [utilization, setUtilization] = useState<Utilization | null>(null);
  const [now, setNow] = useState(Date.now());

  // Reads can answer out of order: only the newest one asked is shown, not an older state after it.
  const asked = useRef(0);
  const retrieve = () => {
    const read = ++asked.current;
    return getJson<Job>('/api/jobs/retrieve', { id, includeApplication: 'true', includeSupport: 'true' })
      .then((found) => read === asked.current && setJob(found))
      .catch((e: Error) => read === asked.current && setError(e.message));
  };

  useEffect(() => {
    setJob(null);
    setLogs({});
    setLogsGone(null);
    setOpened(null);
    void retrieve();
    const stop = followJob(
      id,
      (message) => {
        // A (re)started follow sends the logs from their beginning, and the job as it stands: the
        // first read may be older (a job that started between it and the follow shows no update).
        if (message.initialJob !== undefined) {
          setLogs({});
          void retrieve();
        } else if (message.updates.length > 0) {
          // Cost, end time and output folder change with the updates: the job is read again.
          void retrieve();
        }
        if (message.log.length > 0) {
          setLogs((current) => {
            const next = { ...current };
            for (const chunk of message.log) {
              const text = (next[chunk.rank] ?? '') + (chunk.stdout ?? '') + (chunk.stderr ?? '');
              next[chunk.rank] = text.length > LOG_KEPT ? text.slice(-LOG_KEPT) : text;
            }
            return next;
          });
        }
      },
      setLogsGone,
    );
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => {
      stop();
      clearInterval(tick);
    };
  }, [id]);

  const state = job?.status.state;
  useEffect(() => {
    if (state !== 'IN_QUEUE') return;
    getJson<Utilization>('/api/jobs/retrieveUtilization', { jobId: id })
      .then(setUtilization)
      .catch(() => setUtilization(null));
  }, [state, job?.updates.length]);

  if (error !== null) return <p class="error">{error}</p>;
  if (job === null) return <p class="loading">Loading…</p>;

  const app = job.status.resolvedApplication;
  const support = job.status.resolvedSupport?.support.docker;
  const running = job.status.state === 'RUNNING';
  const final = FINAL_STATES.has(job.status.state);
  const replicas = job.specification.replicas ?? 1;
  const waiting = waitingNotice(job);

  const openTerminal = async () => {
    setNotice(null);
    try {
      const answer = await postJson<{ responses: { session: { sessionIdentifier: string } }[] }>(
        '/api/jobs/interactiveSession',
        { items: [{ id, rank, sessionType: 'SHELL' }] },
      );
      setOpened({ sessionIdentifier: answer.responses[0]!.session.sessionIdentifier });
    } catch (e) {
      setNotice((e as Error).message);
    }
  };
  const appType = app?.invocation.applicationType;

  return (
    <section class="job">
      <p class="crumbs">
        <Link href="/jobs">Jobs</Link> › {job.specification.name ?? job.id}
      </p>
      <h1>
        {job.specification.name ?? job.id} <StateBadge {...job.status} />
      </h1>
      {running && job.status.expiresAt !== undefined && job.status.expiresAt - now <= WARN_BEFORE_MS && (
        <p class="warning" role="alert">
          This job's time runs out in {span(job.status.expiresAt - now)}: extend it below to keep it running.
        </p>
      )}
      {waiting !== undefined && (
        <p class="pending" role="status">
          {waiting}
          {job.status.state === 'IN_QUEUE' &&
            utilization !== null &&
            ` (${utilization.queueStatus.pending} waiting, ${utilization.queueStatus.running} running on these machines)`}
        </p>
      )}
      <dl class="facts">
        <dt>Application</dt>
        <dd>
          {app?.metadata.title ?? job.specification.application.name} {job.specification.application.version}
        </dd>
        <dt>Owner</dt>
        <dd>
          {job.owner.createdBy}
          {job.owner.project !== undefined && ` in project ${job.owner.project}`}
        </dd>
        <dt>Machine</dt>
        <dd>
          {job.specification.product.id}
          {replicas > 1 ? ` × ${replicas}` : ''}
        </dd>
        <dt>Created</dt>
        <dd>{when(job.createdAt)}</dd>
        {job.status.startedAt !== undefined && (
          <>
            <dt>Started</dt>
            <dd>{when(job.status.startedAt)}</dd>
          </>
        )}
        {job.status.expiresAt !== undefined && (
          <>
            <dt>Ends</dt>
            <dd data-testid="ends">
              {when(job.status.expiresAt)}
              {!final && <span class="muted"> ({span(job.status.expiresAt - now)} left)</span>}
            </dd>
          </>
        )}
        {job.status.outcome !== undefined && (
          <>
            <dt>Outcome</dt>
            <dd data-testid="outcome">{job.status.outcome.text}</dd>
          </>
        )}
        <dt>Cost so far</dt>
        <dd data-testid="cost">{credits(job.billing.creditsCharged)}</dd>
        {job.status.exitCode !== undefined && (
          <>
            <dt>Exit code</dt>
            <dd>
              {Object.entries(job.status.exitCode)
                .map(([r, code]) => (replicas > 1 ? `rank ${r}: ${code}` : String(code)))
                .join(', ')}
            </dd>
          </>
        )}
      </dl>

      {!final && (
        <fieldset class="actions">
          <legend class="visually-hidden">Job actions</legend>
          {replicas > 1 && (
            <label>
              Rank{' '}
              <select value={rank} onChange={(e) => setRank(Number(e.currentTarget.value))}>
                {Array.from({ length: replicas }, (_, r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </label>
          )}
          {(appType === 'WEB' || appType === 'VNC') && (
            // The starting page: it waits for the app to answer, then goes there.
            <a class="button primary" href={connectHref(job, rank)} target="_blank" rel="noopener">
              {appType === 'WEB' ? 'Open interface' : 'Open desktop'}
            </a>
          )}
          {support?.terminal !== false && (
            <button type="button" disabled={!running} onClick={() => void openTerminal()}>
              Open terminal
            </button>
          )}
          <Extend
            job={job}
            onDone={(message) => {
              setNotice(message);
              void retrieve();
            }}
          />
          <SuspendResume
            job={job}
            onDone={(message) => {
              setNotice(message);
              void retrieve();
            }}
          />
          <Cancel
            id={id}
            onDone={(message) => {
              setNotice(message);
              void retrieve();
            }}
          />
        </fieldset>
      )}
      {notice !== null && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {opened !== null && !final && (
        <Suspense fallback={<p class="loading">Loading…</p>}>
          <JobTerminal sessionIdentifier={opened.sessionIdentifier} />
        </Suspense>
      )}

      {running && (
        <>
          <h2>Resources</h2>
          <Suspense fallback={<p class="loading">Loading…</p>}>
            <ResourceCharts jobId={id} />
          </Suspense>
        </>
      )}

      <h2>Logs</h2>
      {logsGone !== null && <p class="notice">{logsGone}</p>}
      <Logs logs={logs} replicas={replicas} />

      <h2>Timeline</h2>
      <Timeline updates={job.updates} />

      <h2>Parameters</h2>
      <table class="parameters">
        <tbody>
          {Object.entries(job.specification.parameters ?? {}).map(([name, value]) => (
            <tr key={name}>
              <th scope="row">{name}</th>
              <td>{shown(value)}</td>
            </tr>
          ))}
          {Object.keys(job.specification.parameters ?? {}).length === 0 && (
            <tr>
              <td class="muted">No parameters.</td>
            </tr>
          )}
        </tbody>
      </table>

      {job.output.outputFolder !== undefined && (
        <OutputFiles folder={job.output.outputFolder} refresh={job.updates.length} />
      )}
    </section>
  );
}
