import { DEFAULT_WARN_BEFORE_MS } from '../jobs/expiry-warnings.ts';
import type { Job } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { Product } from '../model/product.ts';
import type { AppSummary } from '../server/schemas.ts';
import { APPS_VALIDATE_USAGE } from './apps.ts';
import { clientFlags, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { CliError } from './errors.ts';
import { finalOutcome, followJob } from './follow.ts';
import {
  formatDuration,
  formatSpan,
  formatTime,
  formatUpdate,
  listOf,
  millisToDuration,
  parseDuration,
  printJson,
  table,
} from './format.ts';
import { cliIo } from './io.ts';
import { resolveJobId } from './job-ids.ts';
import { EXIT_CODES_USAGE, endedAt } from './outcome.ts';

/** The client commands that read and act on jobs, the catalogue and the products. */

export const APPS_USAGE = `Usage: ucompute apps [options]
       ucompute apps show APP[@VERSION] [options]
       ucompute apps validate DIR

Lists the service's applications: name, version, type and title.
"apps show APP" lists an application's parameters; see its --help.
"apps validate DIR" checks a catalogue folder locally (no service needed); see its --help.

${CLIENT_OPTIONS_USAGE}`;

export const PRODUCTS_USAGE = `Usage: ucompute products [options]

Lists the machine types: id, category, vCPUs, memory, GPUs and price per unit (a unit is one
vCPU, or one GPU for products priced per GPU).

${CLIENT_OPTIONS_USAGE}`;

export const SHOW_USAGE = `Usage: ucompute show ID [options]

Shows one job: application, product, state and outcome, times, expiry, output folder, exit
codes, credits charged and every update.
ID may be any unique prefix of a job's id.

${CLIENT_OPTIONS_USAGE}`;

export const LOGS_USAGE = `Usage: ucompute logs ID [-f] [--rank N] [options]

Prints the job's output: stdout of every rank (each line prefixed "[rank]" when the job has
several replicas) on stdout, stderr on stderr. Without -f it prints what there is and returns.
ID may be any unique prefix of a job's id.

Options:
  -f, --follow        keep printing until the job ends, then exit with its outcome's code
  --rank N            only rank N's output (no "[rank]" prefixes)

${CLIENT_OPTIONS_USAGE}
With --json, every message of the follow stream is printed as one line of JSON.

With -f: ${EXIT_CODES_USAGE}`;

export const CANCEL_USAGE = `Usage: ucompute cancel ID... [options]

Stops the jobs. Jobs that have already ended cannot be cancelled (nothing is cancelled then).
ID may be any unique prefix of a job's id.

${CLIENT_OPTIONS_USAGE}`;

export const EXTEND_USAGE = `Usage: ucompute extend ID DURATION [options]

Adds DURATION (45s, 90m, 2h, 1h30m, 1d) to a job's time limit. Jobs without a time limit and jobs
that have ended cannot be extended.
ID may be any unique prefix of a job's id.

${CLIENT_OPTIONS_USAGE}`;

// ---- catalogue and products --------------------------------------------------------------------

export async function appsListCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, APPS_USAGE, {});
  if (help) return 0;
  if (positionals.length > 0) {
    throw new CliError(`unknown apps command "${positionals[0]}"\n\n${APPS_USAGE}\n\n${APPS_VALIDATE_USAGE}`);
  }
  const response = await (await connect(clientFlags(values))).get<unknown>('/api/apps');
  if (values.json) {
    printJson(response);
    return 0;
  }
  const apps = listOf<AppSummary>(response);
  cliIo().stdout.write(
    table(
      ['NAME', 'VERSION', 'TYPE', 'TITLE'],
      apps.map((a) => [a.name, a.version, a.applicationType, a.title]),
    ),
  );
  return 0;
}

function priceOf(p: Product): string {
  const unit = p.pricedPer === 'GPU' ? 'GPU' : 'vCPU';
  const period = { CREDITS_PER_MINUTE: 'minute', CREDITS_PER_HOUR: 'hour', CREDITS_PER_DAY: 'day' }[
    p.unitOfPrice ?? 'CREDITS_PER_MINUTE'
  ];
  return `${p.pricePerUnit} per ${unit}-${period}`;
}

export async function productsCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, PRODUCTS_USAGE, {});
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${PRODUCTS_USAGE}`);
  const response = await (await connect(clientFlags(values))).get<unknown>('/api/products');
  if (values.json) {
    printJson(response);
    return 0;
  }
  cliIo().stdout.write(
    table(
      ['ID', 'CATEGORY', 'CPU', 'MEMORY', 'GPU', 'PRICE/UNIT'],
      listOf<Product>(response).map((p) => [
        p.id,
        p.category,
        String(p.cpu),
        `${p.memoryInGigs} GiB`,
        String(p.gpu ?? 0),
        priceOf(p),
      ]),
    ),
  );
  return 0;
}

// ---- jobs --------------------------------------------------------------------------------------

/** The job's time limit: the last extend's, else the one asked for, else the tool's default as it started. */
function timeLimit(job: Job): string {
  const extended = job.updates.findLast((u) => u.newTimeAllocation !== undefined)?.newTimeAllocation;
  if (extended !== undefined) return `${millisToDuration(extended)} (extended)`;
  const asked = job.specification.timeAllocation;
  if (asked) return formatDuration(asked);
  const { startedAt, expiresAt } = job.status;
  if (startedAt !== undefined && expiresAt !== undefined) {
    return `${millisToDuration(expiresAt - startedAt)} (the tool's default)`;
  }
  return job.status.startedAt !== undefined ? 'none' : "the tool's default";
}

function describeJob(job: Job): string {
  const s = job.specification;
  const st = job.status;
  const rows: [string, string][] = [
    ['id', job.id],
    ['application', `${s.application.name}@${s.application.version}`],
  ];
  if (s.name) rows.push(['name', s.name]);
  rows.push(
    [
      'owner',
      job.owner.project ? `${job.owner.createdBy} in project ${job.owner.project}` : job.owner.createdBy,
    ],
    ['product', `${s.product.id} (${s.product.category})`],
    ['replicas', String(s.replicas ?? 1)],
    ['state', st.state],
    ...(st.outcome ? [['outcome', st.outcome.text] as [string, string]] : []),
    ['created', formatTime(job.createdAt)],
    ['started', formatTime(st.startedAt)],
    ['time limit', timeLimit(job)],
  );
  rows.push(['expires', st.expiresAt !== undefined ? formatTime(st.expiresAt) : '-']);
  const ended = endedAt(job);
  if (ended !== undefined) rows.push(['ended', formatTime(ended)]);
  rows.push(['output folder', job.output.outputFolder ?? '-']);
  const codes = st.exitCode ? Object.entries(st.exitCode) : [];
  rows.push([
    'exit codes',
    codes.length ? codes.map(([rank, code]) => `rank ${rank}: ${code}`).join(', ') : '-',
  ]);
  rows.push([
    'credits',
    `${job.billing.creditsCharged} charged (price ${job.billing.pricePerUnit} per unit)`,
  ]);
  const width = Math.max(...rows.map(([k]) => k.length));
  const updates = job.updates.map((u) => `  ${formatTime(u.timestamp)}  ${formatUpdate(u)}`);
  // A value of several lines (a failure's reason) goes on under its first line.
  const row = ([k, v]: [string, string]) =>
    `${k.padEnd(width)}  ${v.replaceAll('\n', `\n${' '.repeat(width + 2)}`)}`;
  return `${rows.map(row).join('\n')}\nupdates:\n${updates.join('\n')}\n`;
}

function oneId(positionals: string[], usage: string, what = 'one job ID'): string {
  if (positionals.length !== 1) throw new CliError(`expected ${what}\n\n${usage}`);
  return positionals[0]!;
}

export async function showCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, SHOW_USAGE, {});
  if (help) return 0;
  const client = await connect(clientFlags(values));
  const id = await resolveJobId(client, oneId(positionals, SHOW_USAGE));
  const job = await client.get<Job>('/api/jobs/retrieve', { id });
  if (values.json) printJson(job);
  else cliIo().stdout.write(describeJob(job));
  const left =
    job.status.state === 'RUNNING'
      ? (job.status.expiresAt ?? Number.POSITIVE_INFINITY) - Date.now()
      : Infinity;
  if (left <= DEFAULT_WARN_BEFORE_MS) {
    cliIo().stderr.write(
      `warning: the job's time runs out in ${formatSpan(left)}: \`ucompute extend ${id} 1h\` gives it an hour more\n`,
    );
  }
  return 0;
}

export async function cancelCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, CANCEL_USAGE, {});
  if (help) return 0;
  if (positionals.length === 0) throw new CliError(`expected at least one job ID\n\n${CANCEL_USAGE}`);
  const client = await connect(clientFlags(values));
  const ids: string[] = [];
  for (const text of positionals) ids.push(await resolveJobId(client, text));
  // The API leaves an ended job as it is (as UCloud does); a person asking to cancel one is told.
  for (const id of ids) {
    const { state } = (await client.get<Job>('/api/jobs/retrieve', { id })).status;
    // Exit 1 as for every refusal of the service's (2 is for a wrong command line).
    if (isFinal(state)) throw new CliError(`job ${id} has already ended (${state})`, 1);
  }
  const response = await client.post<unknown>('/api/jobs/terminate', { items: ids.map((id) => ({ id })) });
  if (values.json) printJson(response);
  else for (const id of ids) cliIo().stdout.write(`${id}: cancelled\n`);
  return 0;
}

export async function extendCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, EXTEND_USAGE, {});
  if (help) return 0;
  if (positionals.length !== 2) throw new CliError(`expected a job ID and a DURATION\n\n${EXTEND_USAGE}`);
  const [prefix, text] = positionals as [string, string];
  const requestedTime = parseDuration(text, 'DURATION');
  const client = await connect(clientFlags(values));
  const id = await resolveJobId(client, prefix);
  const response = await client.post<unknown>('/api/jobs/extend', { items: [{ jobId: id, requestedTime }] });
  if (values.json) {
    printJson(response);
    return 0;
  }
  const job = await client.get<Job>('/api/jobs/retrieve', { id });
  const allocation = job.updates.findLast((u) => u.newTimeAllocation !== undefined)?.newTimeAllocation;
  const limit = allocation !== undefined ? `; time limit now ${millisToDuration(allocation)}` : '';
  const expires = job.status.expiresAt !== undefined ? `, expires ${formatTime(job.status.expiresAt)}` : '';
  cliIo().stdout.write(`${id}: extended by ${formatDuration(requestedTime)}${limit}${expires}\n`);
  return 0;
}

export async function logsCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, LOGS_USAGE, {
    follow: { type: 'boolean', short: 'f' },
    rank: { type: 'string' },
  });
  if (help) return 0;
  const text = oneId(positionals, LOGS_USAGE);
  const rankText = stringOption(values, 'rank');
  if (rankText !== undefined && !/^\d+$/.test(rankText)) {
    throw new CliError(`--rank: "${rankText}" must be a rank number (0, 1, ...)\n\n${LOGS_USAGE}`);
  }
  const client = await connect(clientFlags(values));
  const id = await resolveJobId(client, text);
  const follow = values.follow === true;
  const job = await followJob(client, id, {
    json: values.json === true,
    follow,
    showUpdates: false,
    ...(rankText !== undefined ? { rank: Number(rankText) } : {}),
  });
  return follow ? finalOutcome(job, { json: values.json === true, toStderr: true }) : 0;
}
