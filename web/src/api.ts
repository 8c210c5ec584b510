import { signal } from '@preact/signals';
import type { Session } from './types.ts';
import { keepValidWorkspace, workspace } from './workspace.ts';

// Every call the interface makes: same-origin, signed in by the HttpOnly session cookie, with the
// session's CSRF token on every state-changing request. No token is kept in the browser.

/** The signed-in session; null once the server says the cookie is missing or no longer valid. */
export const session = signal<Session | null | undefined>(undefined);

/** One field's complaint, as the server names it (`items[0].parameters.top`). */
export interface Issue {
  path: string;
  message: string;
}

/** A refused call: the server's `why`, and the fields it names. */
export class ApiError extends Error {
  readonly status: number;
  readonly issues: Issue[];
  constructor(status: number, why: string, issues: Issue[] = []) {
    super(why);
    this.status = status;
    this.issues = issues;
  }
}

async function refusal(response: Response): Promise<ApiError> {
  const body = (await response.json().catch(() => null)) as { why?: string; issues?: Issue[] } | null;
  return new ApiError(
    response.status,
    body?.why ?? `${response.status} ${response.statusText}`,
    body?.issues,
  );
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const READ_ATTEMPTS = 4;

/**
 * A read is safe to repeat: one lost to a dropped connection (the browser drops connections in
 * flight when the machine's network changes) is sent again, a few times, after a short pause.
 */
async function repeated(send: () => Promise<Response>): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (e) {
      if (attempt >= READ_ATTEMPTS) throw e;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

/** A fetch of the API; a 401 signs the interface out (the sign-in page shows). */
export async function call(method: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  // A request with an Idempotency-Key is as safe to repeat as a read: the server answers a repeat
  // with what the first one made, and makes nothing twice.
  const repeatable = method === 'GET' || headers.has('idempotency-key');
  const csrf = session.value?.csrfToken;
  if (STATE_CHANGING.has(method) && csrf !== undefined) headers.set('x-csrf-token', csrf);
  if (workspace.value !== '' && !path.startsWith('/api/auth/')) headers.set('project', workspace.value);
  const send = () => fetch(path, { ...init, method, headers, credentials: 'same-origin' });
  const response = await (repeatable ? repeated(send) : send());
  if (response.ok) return response;
  const error = await refusal(response);
  if (response.status === 401 && !path.startsWith('/api/auth/')) session.value = null;
  throw error;
}

export async function getJson<T>(
  path: string,
  query: Record<string, string | number | undefined> = {},
): Promise<T> {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) search.set(key, String(value));
  const text = search.toString();
  const response = await call('GET', text === '' ? path : `${path}?${text}`);
  return (await response.json()) as T;
}

export async function sendJson<T>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const response = await call(method, path, {
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await response.json().catch(() => ({}))) as T;
}

export const postJson = <T>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<T> =>
  sendJson<T>('POST', path, body, headers);

/** A new Idempotency-Key: one per thing the user asked for, so that its repeats make it once. */
export function idempotencyKey(): string {
  // getRandomValues, unlike randomUUID, works on a plain-http origin too.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The session the cookie holds, or null. */
export async function loadSession(): Promise<void> {
  try {
    const signedIn = await getJson<Session>('/api/auth/session');
    keepValidWorkspace(signedIn.user);
    session.value = signedIn;
  } catch {
    session.value = null;
  }
}

export async function signIn(token: string): Promise<void> {
  const signedIn = await postJson<Session>('/api/auth/session', { token });
  keepValidWorkspace(signedIn.user);
  session.value = signedIn;
}

export async function signOut(): Promise<void> {
  await sendJson('DELETE', '/api/auth/session').catch(() => {});
  session.value = null;
}

/** The WebSocket URL of a path of this server. */
export function socketUrl(path: string): string {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}`;
}

/** A WebSocket to a path of this server (the cookie and Origin go with it). */
export function socketTo(path: string, protocols?: string[]): WebSocket {
  return new WebSocket(socketUrl(path), protocols);
}
