import { StringDecoder } from 'node:string_decoder';
import { WebSocket } from 'ws';
import type { Backend, ShellStream } from '../jobs/backend.ts';
import type { Sessions } from './sessions.ts';

// UCloud's terminal protocol over a WebSocket, one JSON object per message. The client sends
// `initialize {sessionIdentifier, cols, rows}` first, then `input {data}` and `resize {cols, rows}`;
// the server answers `data {data}`, `ack` for each input, and `closed` when the shell has ended,
// with the shell's `exitCode` where it is known (a field UCloud's clients ignore).

export type ShellRequest =
  | { type: 'initialize'; sessionIdentifier: string; cols: number; rows: number }
  | { type: 'input'; data: string }
  | { type: 'resize'; cols: number; rows: number };

export type ShellResponse =
  | { type: 'data'; data: string }
  | { type: 'ack' }
  | { type: 'closed'; exitCode?: number };

/** Input held while the shell opens; a client that sends more is not waiting for it. */
const MAX_PENDING_BYTES = 1024 * 1024;

/** How long a client has to initialize before the socket is closed. */
const INITIALIZE_WITHIN_MS = 10_000;

/** How long a shell whose output ended may take to tell its exit code. */
const EXIT_CODE_WITHIN_MS = 2_000;

export interface ShellDeps {
  sessions: Sessions;
  backend: Pick<Backend, 'shell'>;
  log: { warn(obj: object, msg?: string): void };
}

/** Runs one terminal session on a WebSocket, from `initialize` until either side ends. */
export function serveShell(socket: WebSocket, deps: ShellDeps): void {
  let shell: ShellStream | undefined;
  let starting = false;
  // What a client sends right after initialize, while the shell is being opened.
  const pending: ShellRequest[] = [];
  let pendingBytes = 0;
  const send = (message: ShellResponse) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const close = (code: number, reason: string) => {
    clearTimeout(deadline);
    shell?.destroy();
    if (socket.readyState === WebSocket.OPEN) socket.close(code, reason);
  };
  const deadline = setTimeout(() => close(4408, 'initialize first'), INITIALIZE_WITHIN_MS);

  /** Trades the session identifier for a shell of the job's rank, once. */
  async function open(message: Extract<ShellRequest, { type: 'initialize' }>): Promise<void> {
    const session = await deps.sessions.takeShell(message.sessionIdentifier);
    if (!session) {
      close(4401, 'the session is not valid: open a new one');
      return;
    }
    let opened: ShellStream;
    try {
      opened = await deps.backend.shell(session.jobId, session.rank, {
        cols: message.cols,
        rows: message.rows,
      });
    } catch (err) {
      deps.log.warn({ err, jobId: session.jobId, rank: session.rank }, 'opening a shell failed');
      close(4404, 'the job has no running replica with that rank');
      return;
    }
    clearTimeout(deadline);
    if (socket.readyState !== WebSocket.OPEN) {
      opened.destroy();
      return;
    }
    shell = opened;
    for (const early of pending.splice(0)) apply(opened, early);
    const decoder = new StringDecoder('utf8');
    opened.on('data', (chunk: Buffer) => send({ type: 'data', data: decoder.write(chunk) }));
    opened.on('error', () => opened.destroy());
    // A pty's stream ends when the shell exits but may never close: its input side is open.
    let ending = false;
    const ended = async () => {
      if (ending) return;
      ending = true;
      const exitCode = await exitCodeOf(opened);
      if (socket.readyState !== WebSocket.OPEN) return;
      send({ type: 'closed', ...(exitCode !== null ? { exitCode } : {}) });
      close(1000, 'the shell has ended');
    };
    opened.on('end', ended);
    opened.on('close', ended);
  }

  socket.on('close', () => {
    clearTimeout(deadline);
    shell?.destroy();
  });
  socket.on('message', (raw, binary) => {
    const message = binary ? undefined : parse(String(raw));
    if (!message) {
      close(4400, 'messages are JSON objects: initialize, input or resize');
      return;
    }
    if (message.type === 'initialize') {
      if (starting) {
        close(4400, 'initialize only once');
        return;
      }
      starting = true;
      open(message).catch((err: unknown) => {
        deps.log.warn({ err }, 'opening a shell failed');
        close(1011, 'internal error');
      });
      return;
    }
    if (!starting) {
      close(4400, 'initialize first');
      return;
    }
    if (shell) {
      apply(shell, message);
      return;
    }
    pendingBytes += message.type === 'input' ? message.data.length : 0;
    if (pendingBytes > MAX_PENDING_BYTES) close(1009, 'too much input before the shell started');
    else pending.push(message);
  });

  function apply(to: ShellStream, message: ShellRequest): void {
    if (message.type === 'input') {
      to.write(message.data);
      send({ type: 'ack' });
    } else if (message.type === 'resize') {
      to.resize({ cols: message.cols, rows: message.rows });
    }
  }
}

/** The shell's exit code, or null when it does not tell one soon after its output ended. */
function exitCodeOf(shell: ShellStream): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), EXIT_CODE_WITHIN_MS);
  });
  return Promise.race([shell.exitCode, late]).finally(() => clearTimeout(timer));
}

const isSize = (n: unknown): n is number =>
  Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1000;

/** A well-formed request, or undefined. */
function parse(text: string): ShellRequest | undefined {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof m !== 'object' || m === null) return undefined;
  if (m.type === 'input' && typeof m.data === 'string') return { type: 'input', data: m.data };
  if (m.type === 'resize' && isSize(m.cols) && isSize(m.rows)) {
    return { type: 'resize', cols: m.cols, rows: m.rows };
  }
  if (
    m.type === 'initialize' &&
    typeof m.sessionIdentifier === 'string' &&
    isSize(m.cols) &&
    isSize(m.rows)
  ) {
    return { type: 'initialize', sessionIdentifier: m.sessionIdentifier, cols: m.cols, rows: m.rows };
  }
  return undefined;
}
