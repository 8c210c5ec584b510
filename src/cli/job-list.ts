import type { Job } from '../model/job.ts';
import { JOB_STATES } from '../model/job-states.ts';
import { OUTCOME_KINDS } from '../model/outcome-kinds.ts';
import { clientFlags, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { formatSpan, formatTime, printJson, table } from './format.ts';
import { cliIo } from './io.ts';
import { endedAt, shortOutcomeOf } from './outcome.ts';

const STATES: string[] = [...JOB_STATES];
/** Outcomes as options name them: out-of-credits for OUT_OF_CREDITS. */
const OUTCOMES: string[] = OUTCOME_KINDS.map((k) => k.toLowerCase().replaceAll('_', '-'));

const MAX_PAGE = 250;
/** How often a watch draws ELAPSED and LEFT again; it reads the list again only when a job changed. */
const WATCH_INTERVAL_MS = 2000;
/** A watch ends by itself after a day, so that a forgotten terminal does not watch forever. */
const WATCH_MAX_MS = 24 * 3600 * 1000;

export const JOBS_USAGE = `Usage: ucompute jobs [options]

Lists jobs, newest first: id, application, state and, once it ended, how ("SUCCESS, cancelled by
alice", "SUCCESS, completed (exit 1 on rank 0)"), creation time, time run (ELAPSED), time left
before the job's limit (LEFT), name, who started it (and in which project), and the backend's
latest word. With --project, only that project's jobs.

Options:
  --state STATE       only jobs in this state (${STATES.join(', ')})
  --outcome OUTCOME   only jobs that ended this way (${OUTCOMES.join(', ')})
  --app NAME          only jobs of this application
  --limit N           at most N jobs (default 50)
  --watch             redraw the list when a job changes (pushed by the service) and its times
                      every ${WATCH_INTERVAL_MS / 1000} s, until Ctrl-C

${CLIENT_OPTIONS_USAGE}`;

interface ListOptions {
  state: string | undefined;
  outcome: string | undefined;
  app: string | undefined;
  limit: number;
}

export async function jobsCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, JOBS_USAGE, {
    state: { type: 'string' },
    outcome: { type: 'string' },
    app: { type: 'string' },
    limit: { type: 'string' },
    watch: { type: 'boolean' },
  });
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${JOBS_USAGE}`);
  const state = stringOption(values, 'state')?.toUpperCase();
  if (state !== undefined && !STATES.includes(state)) {
    // "cancelled", "expired"… are how a job ended, which people try as a state first.
    const asOutcome = OUTCOMES.includes(state.toLowerCase())
      ? `; for how jobs ended: --outcome ${state.toLowerCase()}`
      : '';
    throw new CliError(`--state: "${values.state}" is not one of ${STATES.join(', ')}${asOutcome}`);
  }
  const outcome = stringOption(values, 'outcome')?.toLowerCase();
  if (outcome !== undefined && !OUTCOMES.includes(outcome)) {
    throw new CliError(`--outcome: "${values.outcome}" is not one of ${OUTCOMES.join(', ')}`);
  }
  const limitText = stringOption(values, 'limit') ?? '50';
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || !Number.isSafeInteger(limit) || limit < 1) {
    throw new CliError(`--limit: "${limitText}" must be a whole number of at least 1`);
  }
  const options = {
    state,
    outcome: outcome?.toUpperCase().replaceAll('-', '_'),
    app: stringOption(values, 'app'),
    limit,
  };
  const client = await connect(clientFlags(values));
  const json = values.json === true;
  if (values.watch === true) return watchJobs(client, options, json);

  const { items, next } = await listJobs(client, options);
  if (json) printJson({ items, next });
  else cliIo().stdout.write(jobsTable(items, Date.now()));
  return 0;
}

/** Pages of at most MAX_PAGE, newest first, until the limit or the last page. */
async function listJobs(client: Client, o: ListOptions): Promise<{ items: Job[]; next: string | null }> {
  const items: Job[] = [];
  let next: string | null | undefined;
  const pages = Math.ceil(o.limit / MAX_PAGE);
  for (let page = 0; items.length < o.limit && page <= pages; page++) {
    const response = await client.get<{ items: Job[]; next: string | null }>('/api/jobs/browse', {
      itemsPerPage: Math.min(o.limit - items.length, MAX_PAGE),
      next: next ?? undefined,
      filterState: o.state,
      filterOutcome: o.outcome,
      filterApplication: o.app,
    });
    items.push(...response.items.slice(0, o.limit - items.length));
    next = response.next;
    if (!next) break;
  }
  return { items, next: next ?? null };
}

export function jobsTable(jobs: Job[], now: number): string {
  return table(
    ['ID', 'APP', 'STATE', 'CREATED', 'ELAPSED', 'LEFT', 'NAME', 'OWNER', 'STATUS'],
    jobs.map((j) => [
      j.id,
      `${j.specification.application.name}@${j.specification.application.version}`,
      shortOutcomeOf(j),
      formatTime(j.createdAt),
      elapsed(j, now),
      left(j, now),
      j.specification.name ?? '',
      j.owner.project !== undefined ? `${j.owner.createdBy} in ${j.owner.project}` : j.owner.createdBy,
      // The latest word from the backend: a waiting job's reason and queue position, say.
      j.updates.findLast((u) => u.status !== undefined)?.status ?? '',
    ]),
  );
}

/** Time run: from its start to its end, or to now while it runs. */
function elapsed(job: Job, now: number): string {
  const started = job.status.startedAt;
  return started === undefined ? '-' : formatSpan((endedAt(job) ?? now) - started);
}

/** Time before the job's limit, while it runs. */
function left(job: Job, now: number): string {
  const expires = job.status.expiresAt;
  return expires === undefined || endedAt(job) !== undefined ? '-' : formatSpan(expires - now);
}

/**
 * Calls `changed` at each event of /api/jobs/events: a job changed, the stream is open (`ready`),
 * or changes were lost (`resync`). Resolves when the stream ends; rejects when it cannot open
 * (a service without it), so that the watch reads the list on every tick instead.
 */
async function followChanges(client: Client, signal: AbortSignal, changed: () => void): Promise<void> {
  const response = await client.bytes('GET', '/api/jobs/events', {}, { signal });
  if (!response.body) return;
  let text = '';
  for await (const chunk of response.body.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    const end = text.lastIndexOf('\n\n');
    if (end < 0) continue;
    if (/^event: /m.test(text.slice(0, end))) changed();
    text = text.slice(end + 2);
  }
}

/**
 * Redraws the list when a job changes (a terminal is cleared first; elsewhere each listing
 * follows the last), and its times every WATCH_INTERVAL_MS, until Ctrl-C or WATCH_MAX_MS. The
 * list is read again when the service says a job changed, or on every tick when it cannot say.
 * With JSON, one line per change.
 */
async function watchJobs(client: Client, o: ListOptions, json: boolean): Promise<number> {
  const interrupted = new AbortController();
  const stop = () => interrupted.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const clear = cliIo().stdout.isTTY ? '\x1b[H\x1b[2J' : '';
  const deadline = Date.now() + WATCH_MAX_MS;
  let stale = true;
  let pushed = true;
  let wake = () => {};
  const changes = followChanges(client, interrupted.signal, () => {
    stale = true;
    wake();
  }).then(
    () => {
      pushed = false;
    },
    () => {
      pushed = false;
    },
  );
  let shown = '';
  let list: { items: Job[]; next: string | null } | undefined;
  try {
    while (Date.now() < deadline && !interrupted.signal.aborted) {
      if (stale || !pushed || list === undefined) {
        stale = false;
        list = await listJobs(client, o);
      }
      const text = json ? `${JSON.stringify(list)}\n` : jobsTable(list.items, Date.now());
      if (text !== shown) {
        cliIo().stdout.write(json ? text : `${clear}${formatTime(Date.now())}\n${text}\n`);
        shown = text;
      }
      if (stale) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, WATCH_INTERVAL_MS);
        function done() {
          clearTimeout(timer);
          interrupted.signal.removeEventListener('abort', done);
          wake = () => {};
          resolve();
        }
        wake = done;
        interrupted.signal.addEventListener('abort', done);
      });
    }
  } finally {
    interrupted.abort();
    await changes;
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return 0;
}
