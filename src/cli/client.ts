import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type WebSocket from 'ws';
import { ADMIN_TOKEN_FILE, DEFAULT_PORT, defaultDataDir } from './defaults.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

// ws (14 modules) loads with the first socket: most commands never open one.
const require = createRequire(import.meta.url);
let webSocketClass: typeof WebSocket | undefined;
const webSocket = (): typeof WebSocket => (webSocketClass ??= require('ws') as typeof WebSocket);

/** The options every client command takes, for `parseArgs`. */
export const CLIENT_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  'data-dir': { type: 'string' },
  project: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const CLIENT_OPTIONS_USAGE = `Connection options (every command that talks to the service):
  --url URL           the service (default $UCOMPUTE_URL, else http://127.0.0.1:${DEFAULT_PORT})
  --token TOKEN       API token (default $UCOMPUTE_TOKEN, else <data-dir>/${ADMIN_TOKEN_FILE})
  --data-dir DIR      where \`ucompute serve\` wrote its admin token
                      (default $UCOMPUTE_DATA_DIR, /var/lib/ucompute as root, else ~/.local/share/ucompute)
  --project ID        work in this project's workspace (default $UCOMPUTE_PROJECT): jobs run on
                      its credits, lists show its jobs, wallets and usage, relative file paths
                      start at /projects/ID
  --json              print the API's responses as JSON instead of tables`;

export interface ClientFlags {
  url?: string | undefined;
  token?: string | undefined;
  'data-dir'?: string | undefined;
  project?: string | undefined;
}

export interface Client {
  readonly url: string;
  /** The project whose workspace every request works in (sent as the `Project` header), if any. */
  readonly project: string | undefined;
  get<T>(path: string, query?: Record<string, string | number | undefined>): Promise<T>;
  post<T>(path: string, body: unknown, headers?: Record<string, string>): Promise<T>;
  /** DELETE with a JSON body (UCloud's bulk deletes). */
  delete<T>(path: string, body: unknown): Promise<T>;
  /**
   * A request whose body or answer is a stream of bytes (files): the answer, once the service
   * accepted it; a refusal throws like `get`.
   */
  bytes(
    method: 'GET' | 'PUT',
    path: string,
    query: Record<string, string | number | undefined>,
    init?: { headers?: Record<string, string>; body?: Readable; signal?: AbortSignal },
  ): Promise<Response>;
  /**
   * Opens a WebSocket to `path`. Attach listeners before awaiting `opened` (the first messages
   * may arrive with the upgrade); `opened` rejects like `get` when the upgrade is refused.
   */
  socket(path: string, query: Record<string, string>): { ws: WebSocket; opened: Promise<void> };
}

/** The service refused a request: `status` is the HTTP status. */
export class ApiError extends CliError {
  readonly status: number;

  constructor(status: number, message: string, exitCode: number) {
    super(message, exitCode);
    this.status = status;
  }
}

interface ApiIssue {
  path?: string;
  message?: string;
}

/** The token from --token, $UCOMPUTE_TOKEN, or the file `ucompute serve` writes; none is fine until a 401. */
async function findToken(flags: ClientFlags): Promise<{ token?: string; source: string }> {
  if (flags.token) return { token: flags.token, source: '--token' };
  const { UCOMPUTE_TOKEN } = cliIo().env;
  if (UCOMPUTE_TOKEN) return { token: UCOMPUTE_TOKEN, source: 'UCOMPUTE_TOKEN' };
  const file = join(flags['data-dir'] ?? defaultDataDir(), ADMIN_TOKEN_FILE);
  try {
    const token = (await readFile(file, 'utf8')).trim();
    return token ? { token, source: file } : { source: `${file} (empty)` };
  } catch {
    return { source: `${file} (missing)` };
  }
}

export async function connect(flags: ClientFlags): Promise<Client> {
  const url = (flags.url ?? cliIo().env.UCOMPUTE_URL ?? `http://127.0.0.1:${DEFAULT_PORT}`).replace(
    /\/+$/,
    '',
  );
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`--url: ${url} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new CliError(`--url: ${url} must start with http:// or https://`);
  }
  const { token, source } = await findToken(flags);
  const project = flags.project ?? (cliIo().env.UCOMPUTE_PROJECT || undefined);
  const auth: Record<string, string> = {
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...(project !== undefined ? { project } : {}),
  };

  const unreachable = (cause: unknown): CliError => {
    const code = networkCode(cause);
    const detail = code && code !== 'ECONNREFUSED' ? ` (${code})` : '';
    return new CliError(`cannot reach ucompute at ${url}${detail}: is \`ucompute serve\` running?`, 1);
  };

  const refused = (status: number, body: unknown): ApiError => {
    if (status === 401) {
      const hint = token ? '' : `; no token was found in ${source}`;
      return new ApiError(401, `the token was refused (set UCOMPUTE_TOKEN or --token)${hint}`, 1);
    }
    const { message, issues } = errorBody(body);
    const issueLines = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message));
    // The service's message for bad input is its issues joined; print each issue on its own line instead.
    const repeatsIssues = message !== undefined && issueLines.length > 0 && message === issueLines.join('; ');
    const lines = [...(message !== undefined && !repeatsIssues ? [message] : []), ...issueLines];
    if (lines.length === 0) lines.push(`the service answered ${status}`);
    if (status >= 500) lines[0] = `the service failed (${status}): ${lines[0]}`;
    // reportError prefixes the first line with "error: "; the others get it too, one issue per line.
    return new ApiError(status, lines.join('\nerror: '), status === 400 ? 2 : 1);
  };

  async function request<T>(method: string, path: string, body?: unknown, headers = {}): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${url}${path}`, {
        method,
        headers: {
          ...auth,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (e) {
      throw unreachable(e);
    }
    const parsedBody = await answerBody(response);
    if (!response.ok) throw refused(response.status, parsedBody);
    return parsedBody as T;
  }

  async function bytes(
    method: 'GET' | 'PUT',
    path: string,
    query: Record<string, string | number | undefined>,
    init: { headers?: Record<string, string>; body?: Readable; signal?: AbortSignal } = {},
  ): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(`${url}${path}${queryString(query)}`, {
        method,
        headers: { ...auth, ...init.headers },
        ...(init.signal ? { signal: init.signal } : {}),
        // A streamed request body is sent as it is read (undici needs `duplex` to say so).
        ...(init.body ? { body: Readable.toWeb(init.body) as ReadableStream, duplex: 'half' } : {}),
      });
    } catch (e) {
      throw unreachable(e);
    }
    if (response.ok) return response;
    throw refused(response.status, await answerBody(response));
  }

  return {
    url,
    project,
    bytes,
    get: (path, query = {}) => request('GET', `${path}${queryString(query)}`),
    post: (path, body, headers) => request('POST', path, body, headers),
    delete: (path, body) => request('DELETE', path, body),
    socket(path, query) {
      const ws = new (webSocket())(`${url.replace(/^http/, 'ws')}${path}${queryString(query)}`, {
        headers: auth,
      });
      const opened = new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('unexpected-response', (_req, res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => {
            let parsedBody: unknown;
            try {
              parsedBody = JSON.parse(text);
            } catch {
              parsedBody = { message: text || undefined };
            }
            reject(refused(res.statusCode ?? 500, parsedBody));
            ws.terminate();
          });
        });
        ws.once('error', (e) => reject(unreachable(e)));
      });
      return { ws, opened };
    },
  };
}

/** An answer's JSON body; text that is not JSON becomes `{message}`. */
async function answerBody(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return { message: text };
  }
}

function queryString(query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const s = params.toString();
  return s ? `?${s}` : '';
}

/** UCloud's `{why, errorCode}` (older servers: `message`), with our field-level `issues`. */
function errorBody(body: unknown): { message?: string; issues: { path: string; message: string }[] } {
  if (typeof body !== 'object' || body === null) return { issues: [] };
  const b = body as { why?: unknown; message?: unknown; issues?: unknown };
  const issues = Array.isArray(b.issues)
    ? (b.issues as ApiIssue[]).map((i) => ({ path: String(i.path ?? ''), message: String(i.message ?? '') }))
    : [];
  const message = typeof b.why === 'string' ? b.why : b.message;
  return { ...(typeof message === 'string' ? { message } : {}), issues };
}

/** The system error code behind a failed fetch or socket (fetch wraps it in `cause`). */
function networkCode(e: unknown): string | undefined {
  for (
    let x = e as { code?: unknown; cause?: unknown } | undefined, n = 0;
    x && n < 5;
    x = x.cause as typeof x, n++
  ) {
    if (typeof x.code === 'string' && /^E[A-Z]+$/.test(x.code)) return x.code;
    const errors = (x as { errors?: unknown }).errors;
    if (Array.isArray(errors)) return networkCode(errors[0]);
  }
  return undefined;
}
