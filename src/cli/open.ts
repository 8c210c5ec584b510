import { parseArgs } from 'node:util';
import type { Job } from '../model/job.ts';
import { clientFlags } from './args.ts';
import { openInBrowser } from './browser.ts';
import { CLIENT_OPTIONS, CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const OPEN_USAGE = `Usage: ucompute open ID [--rank N] [options]

Opens the web app or remote desktop of a job: waits, as the web interface's Connect does, until
the job runs and its app answers (saying what it waits for on standard error), then prints a
one-time link that signs your browser in to the app (valid for a minute), and opens it in your
browser when there is one. The browser is handed a file only you can read that leads to the link,
never the link itself: a command line is readable by every user of the machine.

Options:
  --rank N            which replica (default 0)
  --url-only          print the link only; open no browser
  --no-wait           open the session at once (the job must be running), without waiting for
                      the app to answer

${CLIENT_OPTIONS_USAGE}`;

interface OpenedSession {
  responses: {
    session: { type: string; redirectClientTo?: string; url?: string; sessionIdentifier?: string };
  }[];
}

/** The job id and rank from a command line of `open` or `shell`. */
export function jobAndRank(
  positionals: string[],
  rankFlag: string | undefined,
  usage: string,
): { id: string; rank: number } {
  if (positionals.length !== 1) throw new CliError(`expected one job ID\n\n${usage}`);
  const rank = rankFlag === undefined ? 0 : Number(rankFlag);
  if (!Number.isInteger(rank) || rank < 0) throw new CliError('--rank must be a replica number (0, 1, ...)');
  return { id: positionals[0] as string, rank };
}

/** Opens one session of `sessionType` on a job's replica. */
export async function openSession(
  client: Client,
  id: string,
  rank: number,
  sessionType: 'WEB' | 'VNC' | 'SHELL',
): Promise<OpenedSession['responses'][number]['session']> {
  const opened = await client.post<OpenedSession>('/api/jobs/interactiveSession', {
    items: [{ id, rank, sessionType }],
  });
  const session = opened.responses[0]?.session;
  if (!session) throw new CliError('the service opened no session');
  return session;
}

export async function openCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...CLIENT_OPTIONS,
      rank: { type: 'string' },
      'url-only': { type: 'boolean' },
      'no-wait': { type: 'boolean' },
    },
  });
  if (values.help) {
    cliIo().stdout.write(`${OPEN_USAGE}\n`);
    return 0;
  }
  const { id, rank } = jobAndRank(positionals, values.rank, OPEN_USAGE);
  const client = await connect(clientFlags(values));
  const job = await client.get<Job>('/api/jobs/retrieve', { id });
  const { name, version } = job.specification.application;
  const app = await client.get<{ application: { invocation: { applicationType: string } } }>(
    '/api/apps/retrieve',
    { name, version },
  );
  const type = app.application.invocation.applicationType;
  if (type !== 'WEB' && type !== 'VNC') {
    throw new CliError(
      `${name} is a ${type} application: it has no page to open; try \`ucompute shell ${id}\``,
    );
  }
  if (!values['no-wait']) await untilAnswering(client, id, rank);
  const session = await openSession(client, id, rank, type);
  const link = session.redirectClientTo ?? session.url ?? '';
  if (values.json) {
    cliIo().stdout.write(`${JSON.stringify(session)}\n`);
    return 0;
  }
  cliIo().stdout.write(`${link}\n`);
  if (!values['url-only'] && (await openInBrowser(link, `Open ${name} (job ${id})`))) {
    cliIo().stdout.write('opened in your browser\n');
  }
  return 0;
}

interface Readiness {
  state: string;
  ready: boolean;
  status?: string;
}

/** Each wait asks the service to hold on this long; `open` waits an hour at most. */
const WAIT_MS = 10_000;
const MAX_WAITS = 360;

/**
 * Waits until the job runs and its app answers, saying on standard error what it waits for each
 * time that changes; a job that ends first is an error naming its state and last word.
 */
async function untilAnswering(client: Client, id: string, rank: number): Promise<void> {
  let said = '';
  for (let wait = 0; wait < MAX_WAITS; wait++) {
    const now = await client.get<Readiness>('/api/jobs/interactiveSession/ready', {
      id,
      rank,
      waitMs: WAIT_MS,
    });
    if (now.ready) return;
    if (['SUCCESS', 'FAILURE', 'EXPIRED'].includes(now.state)) {
      throw new CliError(`job ${id} has ended (${now.state})${now.status ? `: ${now.status}` : ''}`, 1);
    }
    const saying =
      now.state === 'RUNNING'
        ? 'the job runs; waiting for its app to answer'
        : `waiting for the job to start (${now.state}${now.status ? `: ${now.status}` : ''})`;
    if (saying !== said) cliIo().stderr.write(`${saying}\n`);
    said = saying;
  }
  throw new CliError(`job ${id}'s app did not answer within an hour; try again, or --no-wait`, 1);
}
