/** Calls to a test world as a browser at `localhost:<port>` makes them, and signing it in. */
import assert from 'node:assert/strict';
import { type Answer, call, type World } from './interactive.ts';

/** The host a browser reaches the world at: its listen address, loopback, named localhost. */
export const host = (w: World) => `localhost:${w.port}`;
/** The world's own origin, its default public URL. */
export const origin = (w: World) => `http://${host(w)}`;

export interface RequestOptions {
  cookie?: string;
  csrf?: string;
  bearer?: string;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as a URL-encoded form, as a browser sends a page's form. */
  form?: Record<string, string>;
  origin?: string;
  host?: string;
}

export async function request(
  w: World,
  method: string,
  path: string,
  o: RequestOptions = {},
): Promise<Answer & { json: () => Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (o.cookie !== undefined) headers.cookie = o.cookie;
  if (o.csrf !== undefined) headers['x-csrf-token'] = o.csrf;
  if (o.bearer !== undefined) headers.authorization = `Bearer ${o.bearer}`;
  if (o.origin !== undefined) headers.origin = o.origin;
  let body: string | undefined;
  if (o.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(o.body);
  } else if (o.form !== undefined) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(o.form).toString();
  }
  const answer = await call(w.port, {
    host: o.host ?? host(w),
    path,
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  return { ...answer, json: () => JSON.parse(answer.body) };
}

/** The `name=value` of the answer's Set-Cookie for `name`, if it sets one. */
export function setCookie(answer: Answer, name: string): string | undefined {
  const line = answer.headers['set-cookie']?.find((c) => c.startsWith(`${name}=`));
  return line?.split(';')[0];
}

/** Signs a browser in as `who` with its token: the cookie (name=value) and the CSRF token. */
export async function signIn(
  w: World,
  who: 'alice' | 'bob' = 'alice',
): Promise<{ cookie: string; csrf: string; secret: string }> {
  const answer = await request(w, 'POST', '/api/auth/session', { body: { token: w.tokens[who] } });
  assert.equal(answer.status, 200, answer.body);
  const cookie = (answer.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
  return { cookie, csrf: answer.json().csrfToken as string, secret: cookie.split('=')[1] ?? '' };
}
