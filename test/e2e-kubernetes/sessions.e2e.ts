/**
 * A web session on a real cluster with Volcano: ucompute in process (outside the cluster, so
 * through port-forward) starts the Jupyter example (quay.io/jupyter/base-notebook), opens its
 * session, gets the app's pages through the proxy, then cancels the job. Skipped when KUBECONFIG
 * is unset; run with `npm run test:e2e-kubernetes` (needs what kubernetes.e2e.ts says, and nodes
 * that can pull the Jupyter image).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { appGet, post, serveOnKubernetes, signIn, submitJupyter } from '../support/kubernetes-sessions.ts';

const skip = process.env.KUBECONFIG
  ? false
  : 'KUBECONFIG is unset: no cluster to run the real-cluster tests against';
const CONFIG = {
  kubernetes: {
    namespaceStrategy: 'single' as const,
    namespace: process.env.UCOMPUTE_E2E_NAMESPACE ?? 'ucompute-e2e',
    storageClaim: process.env.UCOMPUTE_E2E_STORAGE_CLAIM ?? 'ucompute-storage',
  },
};

async function until(what: string, condition: () => Promise<boolean> | boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`${what} did not happen within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

test('the Jupyter example opens through the session proxy on a real cluster, then is cancelled', {
  skip,
  timeout: 600_000,
}, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-e2e-sessions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const served = await serveOnKubernetes(t, CONFIG, dir);
  const id = await submitJupyter(served);
  t.after(() => post(served, '/api/jobs/terminate', { items: [{ id }] }).catch(() => {}));
  // Pulling the image may take minutes on a fresh node.
  await until('the job running', async () => (await served.store.jobs.get(id))?.state === 'RUNNING', 480_000);
  const cookie = await signIn(served, id);
  // Until Jupyter listens the proxy answers 502 with a page saying so.
  await until(
    'Jupyter answering through the proxy',
    async () => {
      return (await appGet(served, id, cookie, '/api/status')).status === 200;
    },
    120_000,
  );
  const status = JSON.parse((await appGet(served, id, cookie, '/api/status')).body) as { started?: string };
  assert.ok(status.started, 'Jupyter reports when it started');
  const tree = await appGet(served, id, cookie, '/tree');
  assert.equal(tree.status, 200, tree.body.slice(0, 500));
  assert.match(tree.body, /jupyter/i);
  // Without the cookie the proxy refuses, on the real cluster too.
  assert.equal((await appGet(served, id, 'ucompute-session=forged', '/tree')).status, 401);
  await post(served, '/api/jobs/terminate', { items: [{ id }] });
  assert.equal((await served.store.jobs.get(id))?.state, 'SUCCESS');
  assert.equal((await appGet(served, id, cookie, '/tree')).status, 401);
});
