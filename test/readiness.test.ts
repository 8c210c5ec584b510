import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { buildServer } from '../src/server/app.ts';
import { BACKEND_LEASE } from '../src/store/leases.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';

async function server(replicated: boolean) {
  const store = await openTestStore();
  const backend = dryBackend({ runForMs: null });
  const service = createJobService({ store, env: env(), backend, replicated });
  const app = await buildServer({ service, store, env: env(), backend, replicated });
  const ready = async () => {
    const r = await app.inject({ url: '/readyz' });
    return { status: r.statusCode, body: r.json() as { ok: boolean; leader?: string; reason?: string } };
  };
  const close = async () => {
    await app.close();
    await service.stop();
    await store.close();
  };
  return { store, ready, close };
}

test('/readyz of the embedded process: ready while its store answers, 503 once it does not', async () => {
  const s = await server(false);
  try {
    assert.deepEqual(await s.ready(), { status: 200, body: { ok: true } });
    await s.store.close();
    const down = await s.ready();
    assert.equal(down.status, 503);
    assert.match(down.body.reason!, /^the store is not reachable: /);
  } finally {
    await s.close().catch(() => {});
  }
});

test('/readyz of a replica: 503 until a leader is known, then ready naming it; 503 again once it gave the lease up', async () => {
  const s = await server(true);
  try {
    assert.deepEqual(await s.ready(), { status: 503, body: { ok: false, reason: 'no replica leads yet' } });
    await s.store.leases.acquire(BACKEND_LEASE, 'replica-a', 60_000);
    assert.deepEqual(await s.ready(), { status: 200, body: { ok: true, leader: 'replica-a' } });
    await s.store.leases.release(BACKEND_LEASE, 'replica-a');
    assert.equal((await s.ready()).status, 503);
  } finally {
    await s.close();
  }
});
