import { parseArgs } from 'node:util';
import type { ShellRequest, ShellResponse } from '../interactive/shell.ts';
import { CLIENT_OPTIONS, CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { CliError } from './errors.ts';
import { jobAndRank, openSession } from './open.ts';

export const SHELL_USAGE = `Usage: ucompute shell ID [--rank N] [options]

A terminal in a running job's replica, in this terminal: the first of bash, zsh, fish and sh the
job's image has, as the job's user. Leave it as you leave the shell (exit, Ctrl-D); like ssh, the
command exits with the shell's exit code.

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
    process.stdout.write(`${SHELL_USAGE}\n`);
    return 0;
  }
  const { id, rank } = jobAndRank(positionals, values.rank, SHELL_USAGE);
  const client = await connect(values);
  const { sessionIdentifier } = await openSession(client, id, rank, 'SHELL');
  if (sessionIdentifier === undefined) throw new CliError('the service opened no shell session');

  const { ws, opened } = client.socket('/api/jobs/shell', {});
  const send = (message: ShellRequest) => ws.send(JSON.stringify(message));
  let ended: { exitCode?: number } | undefined;
  ws.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as ShellResponse;
    if (message.type === 'data') process.stdout.write(message.data);
    else if (message.type === 'closed') ended = message;
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await opened;

  const size = () => ({ cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });
  send({ type: 'initialize', sessionIdentifier, ...size() });
  const onResize = () => send({ type: 'resize', ...size() });
  const onInput = (data: Buffer) => send({ type: 'input', data: data.toString('utf8') });
  const raw = process.stdin.isTTY;
  if (raw) process.stdin.setRawMode(true);
  process.stdout.on('resize', onResize);
  process.stdin.on('data', onInput);
  try {
    const { code, reason } = await closed;
    if (!ended) throw new CliError(`the terminal was closed: ${reason || `code ${code}`}`, 1);
    return ended.exitCode ?? 0;
  } finally {
    process.stdout.off('resize', onResize);
    process.stdin.off('data', onInput);
    if (raw) process.stdin.setRawMode(false);
    process.stdin.pause();
  }
}
