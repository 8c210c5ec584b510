import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { buildServer } from '../src/server/app.ts';
import type { Store } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { openTestStore, STORE_KINDS, type StoreKind } from './support/store.ts';
import { until } from './support/until.ts';

/** /readyz, the chart's readiness probe: the store answers, and who leads (lease 'backend'). */

/** The server over a new store; `closeStore` is for a test that closes the store itself first. */
async function served(t: TestContext, kind: StoreKind) {
  const store: Store = await openTestStore(kind);
  const backend = dryBackend({ runForMs: null });
  const service = createJobService({ store, env: env(), backend });
  const app = await buildServer({ service, store, env: env(), backend });
  let storeOpen = true;
  const closeStore = async () => {
    storeOpen = false;
    await service.stop();
    await store.close();
  };
  t.after(async () => {
    await app.close();
    if (storeOpen) await closeStore();
    await backend.close();
  });
  return { store, closeStore, get: (url: string) => app.inject({ url }) };
}

for (const kind of STORE_KINDS) {
  describe(`readiness on ${kind}`, () => {
    test('ready while the store answers, with the leader once one holds the lease; 503 once it does not', async (t) => {
      const w = await served(t, kind);
      const before = await w.get('/readyz');
      assert.equal(before.statusCode, 200);
      assert.deepEqual(before.json(), { ok: true, leader: null });

      const lease = await w.store.leases.acquire('backend', 'ucompute-0/1234', 60_000);
      const leading = await w.get('/readyz');
      assert.equal(leading.statusCode, 200);
      assert.deepEqual(leading.json(), {
        ok: true,
        leader: { holder: 'ucompute-0/1234', epoch: lease?.epoch, expiresAt: lease?.expiresAt },
      });

      await w.closeStore();
      const down = await w.get('/readyz');
      assert.equal(down.statusCode, 503);
      assert.equal(down.json().ok, false);
      assert.match(down.json().error, /^the store does not answer: /);
      // Liveness never asks the store: a database outage must not get every replica restarted.
      assert.deepEqual((await w.get('/healthz')).json(), { ok: true });
    });

    test('a lease that has expired names no leader', async (t) => {
      const w = await served(t, kind);
      await w.store.leases.acquire('backend', 'gone', 1);
      const expiresAt = (await w.store.leases.current('backend'))?.expiresAt ?? 0;
      await until(() => Date.now() > expiresAt, { describe: "the lease's expiry has passed" });
      assert.deepEqual((await w.get('/readyz')).json(), { ok: true, leader: null });
    });
  });
}
