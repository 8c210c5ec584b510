import { decodeJwt } from 'jose';

// Calls from the provider to UCloud Core. The provider holds a long-lived refresh token and trades
// it for a short-lived access token (`POST /auth/providers/refresh`, `{items: [{refreshToken}]}` →
// `{responses: [{accessToken}]}`; SDU-eScience/UCloud `backend/auth-service/api/src/main/kotlin/
// AuthProviders.kt:30-32`, Go `provider-integration/shared/pkg/rpc/client.go` RetrieveAccessTokenOrRefresh),
// sent as `Authorization: Bearer` on every call. It is renewed before it expires, and once more
// when Core answers 401.

/** Core answered with an error status, or could not be reached (status 0). */
export class CoreCallError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface CoreClientOptions {
  coreUrl: string;
  /** Read at each refresh, so that a rotated refresh token is picked up. */
  refreshToken: () => Promise<string>;
  now?: () => number;
  /** A call that takes longer fails (and is tried again later by its caller). */
  timeoutMs?: number;
}

export type CoreClient = ReturnType<typeof coreClient>;

/** Renew the access token when less than this much of its life is left. */
const RENEW_BEFORE_MS = 60_000;

export function coreClient(o: CoreClientOptions) {
  const base = o.coreUrl.replace(/\/+$/, '');
  const now = o.now ?? Date.now;
  const timeoutMs = o.timeoutMs ?? 30_000;
  let access: { token: string; expiresAt: number } | undefined;
  let refreshing: Promise<string> | undefined;

  async function send(method: string, path: string, body: unknown, token?: string): Promise<Response> {
    try {
      return await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      throw new CoreCallError(0, `Core could not be reached at ${base}: ${(e as Error).message}`);
    }
  }

  async function answer<T>(response: Response, what: string): Promise<T> {
    const text = await response.text();
    if (!response.ok) {
      let why = text.slice(0, 500);
      try {
        why = (JSON.parse(text) as { why?: string }).why ?? why;
      } catch {}
      throw new CoreCallError(response.status, `${what}: Core answered ${response.status} ${why}`);
    }
    return (text === '' ? {} : JSON.parse(text)) as T;
  }

  async function refresh(): Promise<string> {
    const refreshToken = (await o.refreshToken()).trim();
    const response = await send('POST', '/auth/providers/refresh', { items: [{ refreshToken }] });
    const body = await answer<{ responses?: { accessToken?: string }[] }>(
      response,
      'refreshing the access token',
    );
    const token = body.responses?.[0]?.accessToken;
    if (typeof token !== 'string')
      throw new CoreCallError(502, 'Core answered the refresh without an accessToken');
    const exp = decodeJwt(token).exp;
    // A token without an expiry is used for a minute before asking again.
    access = { token, expiresAt: typeof exp === 'number' ? exp * 1000 : now() + 2 * RENEW_BEFORE_MS };
    return token;
  }

  /** The access token, renewed when it is about to expire; one refresh at a time. */
  async function accessToken(): Promise<string> {
    if (access && access.expiresAt - RENEW_BEFORE_MS > now()) return access.token;
    refreshing ??= refresh().finally(() => {
      refreshing = undefined;
    });
    return refreshing;
  }

  return {
    accessToken,

    /** Calls Core as this provider; a 401 renews the access token once and tries again. */
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
      let response = await send(method, path, body, await accessToken());
      if (response.status === 401) {
        access = undefined;
        response = await send(method, path, body, await accessToken());
      }
      return answer<T>(response, `${method} ${path}`);
    },
  };
}
