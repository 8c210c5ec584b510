import { setTimeout as sleep } from 'node:timers/promises';
import type { RawData } from 'ws';
import { isFinal, type Job, type JobStatus, type JobUpdate } from '../model/job.ts';
import type { Product } from '../model/product.ts';
import type { AppSummary } from '../server/schemas.ts';
import { APPS_VALIDATE_USAGE } from './apps.ts';
import { clientFlags, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { formatDuration, formatMillis, parseDuration } from './durations.ts';
import { CliError } from './errors.ts';
import { resolveJobId } from './job-ids.ts';
import { commandExitCode, endedAt, failedRanks, outcomeOf } from './outcome.ts';

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
ID may be a unique prefix of a job's id.

Shows one job: application, product, state, times, expiry, output folder, exit codes, credits
charged and every update.

${CLIENT_OPTIONS_USAGE}`;

export const LOGS_USAGE = `Usage: ucompute logs ID [-f] [--rank N] [options]
ID may be a unique prefix of a job's id.

Prints the job's output: stdout of every rank (each line prefixed "[rank]" when the job has
several replicas) on stdout, stderr on stderr. Without -f it prints what there is and returns.

Options:
  -f, --follow        keep printing until the job ends; exit code as for \`run\` (see its --help)
  --rank N            only rank N's output (no "[rank]" prefixes)

${CLIENT_OPTIONS_USAGE}
With --json, every message of the follow stream is printed as one line of JSON.`;

export const CANCEL_USAGE = `Usage: ucompute cancel ID... [options]
ID may be a unique prefix of a job's id.

Stops the jobs. Jobs that have already ended cannot be cancelled (nothing is cancelled then).

${CLIENT_OPTIONS_USAGE}`;

export const EXTEND_USAGE = `Usage: ucompute extend ID DURATION [options]
ID may be a unique prefix of a job's id.

Adds DURATION (45s, 90m, 2h, 1h30m, 1d) to a job's time limit. Jobs without a time limit and jobs
that have ended cannot be extended.

${CLIENT_OPTIONS_USAGE}`;

// ---- output helpers ----------------------------------------------------------------------------

/** The items of a list response (`{items}`), or the response itself when it is a list. */
export function listOf<T>(response: unknown): T[] {
  if (Array.isArray(response)) return response as T[];
  const items = (response as { items?: unknown } | undefined)?.items;
  return Array.isArray(items) ? (items as T[]) : [];
}

/** Pretty JSON for one response; one compact line per response when several follow each other. */
export function printJson(value: unknown, line = false): void {
  process.stdout.write(`${line ? JSON.stringify(value) : JSON.stringify(value, null, 2)}\n`);
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

/** Local time, to the second: what a person reads in a terminal. */
export function formatTime(ms: number | undefined): string {
  if (ms === undefined) return '-';
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

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
  process.stdout.write(
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
  process.stdout.write(
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

export function formatUpdate(u: JobUpdate): string {
  const parts: string[] = [];
  if (u.state) parts.push(u.state);
  if (u.status) parts.push(u.status);
  if (u.newTimeAllocation !== undefined) parts.push(`time limit now ${formatMillis(u.newTimeAllocation)}`);
  if (u.outputFolder) parts.push(`output folder ${u.outputFolder}`);
  return parts.join(': ') || '(no change)';
}

/** The job's time limit: the last extend's, else the one asked for, else the tool's default as it started. */
function timeLimit(job: Job): string {
  const extended = job.updates.findLast((u) => u.newTimeAllocation !== undefined)?.newTimeAllocation;
  if (extended !== undefined) return `${formatMillis(extended)} (extended)`;
  const asked = job.specification.timeAllocation;
  if (asked) return formatDuration(asked);
  const { startedAt, expiresAt } = job.status;
  if (startedAt !== undefined && expiresAt !== undefined) {
    return `${formatMillis(expiresAt - startedAt)} (the tool's default)`;
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
    ['state', outcomeOf(job)],
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
  return `${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\nupdates:\n${updates.join('\n')}\n`;
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
  else process.stdout.write(describeJob(job));
  return 0;
}

export async function cancelCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, CANCEL_USAGE, {});
  if (help) return 0;
  if (positionals.length === 0) throw new CliError(`expected at least one job ID\n\n${CANCEL_USAGE}`);
  const client = await connect(clientFlags(values));
  const ids: string[] = [];
  for (const text of positionals) ids.push(await resolveJobId(client, text));
  const response = await client.post<unknown>('/api/jobs/terminate', { items: ids.map((id) => ({ id })) });
  if (values.json) printJson(response);
  else for (const id of ids) process.stdout.write(`${id}: cancelled\n`);
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
  const limit = allocation !== undefined ? `; time limit now ${formatMillis(allocation)}` : '';
  const expires = job.status.expiresAt !== undefined ? `, expires ${formatTime(job.status.expiresAt)}` : '';
  process.stdout.write(`${id}: extended by ${formatDuration(requestedTime)}${limit}${expires}\n`);
  return 0;
}

// ---- waiting and following ---------------------------------------------------------------------

/**
 * A final job's outcome: its state printed (unless JSON) with the ranks that exited non-zero, else
 * the backend's last word; the exit code is `srun`'s (see `commandExitCode`). The state goes to
 * stdout, or to stderr when stdout carries the job's own output.
 */
export function finalOutcome(job: Job, o: { json: boolean; toStderr?: boolean }): number {
  if (!o.json) {
    const failed = job.status.state === 'SUCCESS' ? failedRanks(job) : undefined;
    const detail = failed ?? job.updates.findLast((u) => u.status !== undefined)?.status;
    (o.toStderr ? process.stderr : process.stdout).write(
      `${job.id}: ${job.status.state}${detail ? ` (${detail})` : ''}\n`,
    );
  }
  return commandExitCode(job);
}

/** How long past its deadline a job may still look alive before waiting gives up. */
const EXPIRY_GRACE_MS = 120_000;

/**
 * Polls the job until it reaches a final state. A job with a deadline bounds the wait (plus a
 * grace for the service's monitor); one without runs until it ends or the user interrupts.
 */
export async function waitForJob(client: Client, id: string): Promise<Job> {
  let delay = 100;
  for (;;) {
    const job = await client.get<Job>('/api/jobs/retrieve', { id });
    if (isFinal(job.status.state)) return job;
    if (job.status.expiresAt !== undefined && Date.now() > job.status.expiresAt + EXPIRY_GRACE_MS) {
      throw new CliError(
        `job ${id} passed its deadline (${formatTime(job.status.expiresAt)}) but is still ${job.status.state}`,
        1,
      );
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 2000);
  }
}

interface FollowMessage {
  updates?: JobUpdate[];
  log?: { rank: number; stdout?: string; stderr?: string }[];
  newStatus?: JobStatus;
}

/** Writes log chunks, prefixing whole lines with `[rank] ` when there are several ranks. */
function logWriter(prefixed: boolean) {
  const partial = new Map<string, string>();
  const write = (rank: number, stream: 'stdout' | 'stderr', text: string) => {
    const out = stream === 'stdout' ? process.stdout : process.stderr;
    if (!prefixed) {
      out.write(text);
      return;
    }
    const key = `${rank}:${stream}`;
    const lines = ((partial.get(key) ?? '') + text).split('\n');
    partial.set(key, lines.pop()!);
    for (const line of lines) out.write(`[${rank}] ${line}\n`);
  };
  const flush = () => {
    for (const [key, rest] of partial) {
      if (!rest) continue;
      const [rank, stream] = key.split(':') as [string, 'stdout' | 'stderr'];
      (stream === 'stdout' ? process.stdout : process.stderr).write(`[${rank}] ${rest}\n`);
    }
    partial.clear();
  };
  return { write, flush };
}

/** Without -f, a running job's stream is read until it has been quiet this long (or at most MAX). */
const SNAPSHOT_QUIET_MS = 300;
const SNAPSHOT_MAX_MS = 5000;

/**
 * Reads the job's follow stream: log chunks to stdout/stderr, updates (unless `quiet`) to stderr.
 * With `follow`, until the service closes the stream at the job's end; without, only what is
 * there now. Returns the job as it stands afterwards.
 */
export async function followJob(
  client: Client,
  id: string,
  o: { json: boolean; follow: boolean; showUpdates?: boolean; rank?: number },
): Promise<Job> {
  // Retrieve first: a clear 404 for unknown jobs, and the replica count for prefixes.
  const before = await client.get<Job>('/api/jobs/retrieve', { id });
  const replicas = before.specification.replicas ?? 1;
  if (o.rank !== undefined && o.rank >= replicas) {
    throw new CliError(
      `--rank: job ${id} has ${replicas === 1 ? 'only rank 0' : `ranks 0 to ${replicas - 1}`}`,
    );
  }
  const writer = logWriter(o.rank === undefined && replicas > 1);
  const showUpdates = o.showUpdates ?? o.follow;
  const { ws, opened } = client.socket('/api/jobs/follow', { id });
  let lastState = before.status.state;
  const snapshotting = !o.follow && !isFinal(before.status.state);
  let quiet: NodeJS.Timeout | undefined;
  let limit: NodeJS.Timeout | undefined;
  const stopSoon = () => {
    clearTimeout(quiet);
    quiet = setTimeout(() => ws.close(1000, 'done'), SNAPSHOT_QUIET_MS);
  };

  // Every listener is attached before the upgrade completes: messages may arrive with it.
  ws.on('message', (data: RawData) => {
    let message: FollowMessage;
    try {
      message = JSON.parse(data.toString()) as FollowMessage;
    } catch {
      return;
    }
    if (o.json) printJson(message, true);
    if (!o.json && showUpdates) {
      for (const u of message.updates ?? [])
        process.stderr.write(`${formatTime(u.timestamp)} ${formatUpdate(u)}\n`);
    }
    if (message.newStatus) lastState = message.newStatus.state;
    if (!o.json) {
      for (const chunk of message.log ?? []) {
        if (o.rank !== undefined && chunk.rank !== o.rank) continue;
        if (chunk.stdout) writer.write(chunk.rank, 'stdout', chunk.stdout);
        if (chunk.stderr) writer.write(chunk.rank, 'stderr', chunk.stderr);
      }
    }
    if (snapshotting) stopSoon();
  });
  const done = new Promise<{ code: number; reason: string }>((resolve, reject) => {
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.once('error', (e) =>
      reject(new CliError(`lost the connection to ucompute while following job ${id}: ${e.message}`, 1)),
    );
  }).finally(() => {
    clearTimeout(quiet);
    clearTimeout(limit);
  });
  // A refused upgrade also ends `done`; `opened` reports that one.
  done.catch(() => {});
  await opened;
  if (snapshotting) {
    stopSoon();
    limit = setTimeout(() => ws.close(1000, 'done'), SNAPSHOT_MAX_MS);
  }
  const closed = await done;
  writer.flush();
  if (o.follow && !isFinal(lastState) && closed.code !== 1000) {
    throw new CliError(
      `lost the connection to ucompute while following job ${id}` +
        ` (${closed.code}${closed.reason ? `: ${closed.reason}` : ''})`,
      1,
    );
  }
  return client.get<Job>('/api/jobs/retrieve', { id });
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
