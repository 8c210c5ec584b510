/**
 * The kubernetes backend on a real cluster with Volcano: the scenarios of the fake-server tests
 * (submit, run to the end with exit codes, a non-zero exit, an OOM kill, cancel while queued and
 * while running, logs, shell, restart and reconcile), against the cluster of $KUBECONFIG.
 * Skipped when KUBECONFIG is unset. Not part of `npm test`; run with `npm run test:e2e-kubernetes`.
 *
 * Needs (docs/kubernetes.md): Volcano with its `default` queue open; the namespace
 * UCOMPUTE_E2E_NAMESPACE (default `ucompute-e2e`) holding the storage claim
 * UCOMPUTE_E2E_STORAGE_CLAIM (default `ucompute-storage`); nodes that can pull debian:12.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { kubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.ts';
import type { BackendEvent } from '../../src/jobs/backend.ts';
import { resolvePipelineConfig } from '../../src/model/config.ts';
import { build } from '../support/fixtures.ts';

const KUBECONFIG = process.env.KUBECONFIG;
const NAMESPACE = process.env.UCOMPUTE_E2E_NAMESPACE ?? 'ucompute-e2e';
const skip = KUBECONFIG ? false : 'KUBECONFIG is unset: no cluster to run the real-cluster tests against';
const CONFIG = {
  kubernetes: {
    namespaceStrategy: 'single' as const,
    namespace: NAMESPACE,
    storageClaim: process.env.UCOMPUTE_E2E_STORAGE_CLAIM ?? 'ucompute-storage',
  },
};
/** The example terminal app (a public Debian image), with its command replaced when given. */
async function run(id: string, command?: string) {
  const b = await build(
    {
      application: { name: 'terminal', version: '1.0' },
      product: { id: 'u1-standard-1', category: 'u1-standard' },
      replicas: 1,
      parameters: {},
    },
    { id, config: CONFIG },
  );
  if (command !== undefined)
    b.volcanoJob.spec.tasks[0]!.template.spec.containers[0]!.command = ['sh', '-c', command];
  return b;
}
const unique = (name: string) => `e2e${name}${Date.now().toString(36)}`;

function connect(t: import('node:test').TestContext) {
  const backend = kubernetesBackend({ config: resolvePipelineConfig(CONFIG) });
  const events: BackendEvent[] = [];
  backend.onEvent((e) => void events.push(e));
  t.after(() => backend.close());
  const waitFor = async (predicate: (e: BackendEvent) => boolean, timeoutMs = 180_000) => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const found = events.find(predicate);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`timed out; events: ${JSON.stringify(events)}`);
  };
  return { backend, events, waitFor };
}

test('a job runs on the cluster to its end with its exit codes, and its objects are removed', {
  skip,
}, async (t) => {
  const { backend, waitFor } = connect(t);
  const id = unique('ok');
  await backend.submit(id, await run(id, 'echo hello; sleep 5'));
  await waitFor((e) => e.jobId === id && e.state === 'RUNNING');
  const end = await waitFor((e) => e.jobId === id && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  assert.equal(end.state, 'SUCCESS', end.status);
  assert.deepEqual(end.exitCodes, { '0': 0 });
  assert.equal((await backend.knownJobs()).has(id), false);
});

test('a non-zero exit is SUCCESS with its exit code; an OOM kill is FAILURE', { skip }, async (t) => {
  const { backend, waitFor } = connect(t);
  const failing = unique('x3');
  await backend.submit(failing, await run(failing, 'exit 3'));
  const end = await waitFor((e) => e.jobId === failing && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  assert.equal(end.state, 'SUCCESS', end.status);
  assert.deepEqual(end.exitCodes, { '0': 3 });
  const oom = unique('oom');
  // More than the product's 2 GiB, in memory the kernel must keep: /dev/shm is memory-backed.
  await backend.submit(oom, await run(oom, 'head -c 6G /dev/zero > /dev/shm/fill'));
  const killed = await waitFor((e) => e.jobId === oom && (e.state === 'SUCCESS' || e.state === 'FAILURE'));
  assert.equal(killed.state, 'FAILURE', killed.status);
  assert.match(killed.status, /OOMKilled|evicted/);
});

test('cancel while queued and while running removes the job; a repeat is harmless', { skip }, async (t) => {
  const { backend, waitFor } = connect(t);
  const queued = unique('cq');
  await backend.submit(queued, await run(queued));
  await backend.cancel(queued);
  await backend.cancel(queued);
  assert.equal((await backend.knownJobs()).has(queued), false);
  const running = unique('cr');
  await backend.submit(running, await run(running));
  await waitFor((e) => e.jobId === running && e.state === 'RUNNING');
  await backend.cancel(running);
  assert.equal((await backend.knownJobs()).has(running), false);
});

test('logs, a shell and a restart that finds the job again', { skip }, async (t) => {
  const first = connect(t);
  const id = unique('sh');
  await first.backend.submit(id, await run(id));
  await first.waitFor((e) => e.jobId === id && e.state === 'RUNNING');
  const shell = await first.backend.shell(id, 0, { cols: 80, rows: 24 });
  let out = '';
  shell.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  shell.write('echo ucompute-e2e-$((6*7))\nexit\n');
  await once(shell, 'end');
  assert.match(out, /ucompute-e2e-42/);
  for await (const _ of first.backend.logs(id, { follow: false })) void _;
  await first.backend.close();
  const second = connect(t);
  assert.ok((await second.backend.knownJobs()).has(id));
  await second.backend.cancel(id);
  assert.equal(await second.backend.reconcile(), 0);
});
