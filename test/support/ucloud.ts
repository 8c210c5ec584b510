/** UCloud's clients against the test server: fixtures of their requests, and a world to send them to. */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { type TestServer, testServer } from './server.ts';
import { openTestStore, userWithCredits } from './store.ts';

// biome-ignore lint/suspicious/noExplicitAny: fixtures are free-form JSON.
export function fixture(name: string): Record<string, any> {
  const url = new URL(`../fixtures/ucloud-requests/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8'));
}

export interface World extends TestServer {
  token: string;
  bobToken: string;
}

/** alice has credits for u1-standard; bob has none and sees none of alice's jobs. */
export async function world(): Promise<World> {
  const store = await openTestStore();
  const token = await userWithCredits(store, 'alice');
  await store.users.createUser('bob', false);
  const bobToken = await store.users.createToken('bob', 'test');
  return { ...(await testServer(store)), token, bobToken };
}

export async function send(w: World, method: 'GET' | 'POST', url: string, body?: unknown, token = w.token) {
  const response = await w.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    ...(body !== undefined ? { payload: body as object } : {}),
  });
  return { status: response.statusCode, body: response.json() as Record<string, unknown> };
}

export async function createFrom(w: World, name: string): Promise<string> {
  const r = await send(w, 'POST', '/api/jobs', fixture(name).request);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const [first] = r.body.responses as { id: string }[];
  return first!.id;
}
