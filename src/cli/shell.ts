import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { ShellRequest, ShellResponse } from '../interactive/shell.ts';
import type { Job } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import { CLIENT_OPTIONS, CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';
import { jobAndRank, openSession } from './open.ts';
import { commandExitCode, OUTCOME_EXIT_CODES, outcomeOf } from './outcome.ts';

export const SHELL_USAGE = `Usage: ucompute shell ID [--rank N] [options]

A terminal in a running job's replica, in this terminal: the first of bash, zsh, fish and sh the
job's image has, as the job's user. Leave it as you leave the shell (exit, Ctrl-D); like ssh, the
command exits with the shell's exit code. When the platform ends the job under the shell, it says
how and exits with that outcome's code: ${OUTCOME_EXIT_CODES.CANCELLED} cancelled, ${OUTCOME_EXIT_CODES.EXPIRED} expired, ${OUTCOME_EXIT_CODES.FAILED} failed, ${OUTCOME_EXIT_CODES.OUT_OF_CREDITS} stopped: out
of credits.

Options:
  --rank N            which replica (default 0)

${CLIENT_OPTIONS_USAGE}`;

export async function shellCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...CLIENT_OPTIONS, rank: { type: 'string' } },
  });
  if (values.help) {
    cliIo().stdout.write(`${SHELL_USAGE}\n`);
    return 0;
  }
  const { id, rank } = jobAndRank(positionals, values.rank, SHELL_USAGE);
  const { stdin, stdout, stderr } = cliIo();
  const client = await connect(values);
  const { sessionIdentifier } = await openSession(client, id, rank, 'SHELL');
  if (sessionIdentifier === undefined) throw new CliError('the service opened no shell session');

  const { ws, opened } = client.socket('/api/jobs/shell', {});
  const send = (message: ShellRequest) => ws.send(JSON.stringify(message));
  let ended: { exitCode?: number } | undefined;
  ws.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as ShellResponse;
    if (message.type === 'data') stdout.write(message.data);
    else if (message.type === 'closed') ended = message;
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await opened;

  const size = () => ({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  send({ type: 'initialize', sessionIdentifier, ...size() });
  const onResize = () => send({ type: 'resize', ...size() });
  const onInput = (data: Buffer) => send({ type: 'input', data: data.toString('utf8') });
  const raw = stdin.isTTY;
  if (raw) stdin.setRawMode?.(true);
  stdout.on('resize', onResize);
  stdin.on('data', onInput);
  let close: { code: number; reason: string };
  try {
    close = await closed;
  } finally {
    stdout.off('resize', onResize);
    stdin.off('data', onInput);
    if (raw) stdin.setRawMode?.(false);
    stdin.pause();
  }
  const stopped = await endedByPlatform(client, id, ended?.exitCode);
  if (stopped) {
    stderr.write(`\n${stopped.id}: ${outcomeOf(stopped)}\n`);
    return commandExitCode(stopped);
  }
  if (!ended) throw new CliError(`the terminal was closed: ${close.reason || `code ${close.code}`}`, 1);
  return ended.exitCode ?? 0;
}

/** How long a shell that was killed waits for its job's end to be recorded. */
const JOB_END_WAIT_MS = 15_000;

/**
 * The job, when the platform ended it under the shell (cancelled, expired, failed, out of
 * credits). A shell that exited by itself says so with a code below 128; one that was killed
 * (128 + the signal) or gave none may have died with its job, whose end is recorded a moment later.
 */
async function endedByPlatform(
  client: Client,
  id: string,
  shellExit: number | undefined,
): Promise<Job | undefined> {
  if (shellExit !== undefined && shellExit < 128) return undefined;
  const deadline = Date.now() + JOB_END_WAIT_MS;
  for (let delay = 100; ; delay = Math.min(delay * 2, 1000)) {
    const job = await client.get<Job>('/api/jobs/retrieve', { id });
    if (isFinal(job.status.state)) return job.status.outcome?.kind === 'COMPLETED' ? undefined : job;
    if (Date.now() + delay > deadline) return undefined;
    await sleep(delay);
  }
}
