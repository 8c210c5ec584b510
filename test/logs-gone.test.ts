import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { CHILD_ENV, runCliHere } from './support/cli.ts';
import { jobInState, testServer } from './support/server.ts';
import { rejectsWith } from './support/service.ts';
import { openTestStore, userWithCredits } from './support/store.ts';

// A job that ran and whose logs the backend removed (the local backend's retention, shown on the
// real runtime in retained-logs.test.ts) printed nothing at all: `logs`, the follow socket and
// the web now say the logs are gone and why.

const REASON =
  'removed with its kept folder (local.retainedLogsBytes, 10,000 jobs or ttlSecondsAfterFinished)';
const SAID = `the job's logs are gone: ${REASON}`;

test('the logs of a job whose kept folder was removed say so: service (410), follow socket (4410), CLI', async (t) => {
  const store = await openTestStore();
  const token = await userWithCredits(store, 'alice');
  const removed = new Set<string>();
  const dry = dryBackend({ runForMs: 10 });
  const backend = { ...dry, logsRemoved: (id: string) => (removed.has(id) ? REASON : undefined) };
  const server = await testServer(store, backend);
  t.after(() => server.close());
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (server.app.server.address() as AddressInfo).port;
  const alice = { username: 'alice', admin: false };
  const spec = {
    application: { name: 'mpi-hello', version: '1.0' },
    product: { id: 'u1-standard-1', category: 'u1-standard' },
  };
  const [kept, gone] = await server.service.create(alice, [spec, spec]);
  await jobInState(server, kept!, 'SUCCESS');
  await jobInState(server, gone!, 'SUCCESS');
  removed.add(gone!);

  await rejectsWith(
    (async () => {
      for await (const _ of server.service.logs(alice, gone!, { follow: false })) break;
    })(),
    410,
    /the job's logs are gone: removed with its kept folder/,
  );

  const follow = (id: string) =>
    new Promise<{ code: number; reason: string }>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/api/jobs/follow?id=${id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      ws.once('error', reject);
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
  assert.deepEqual(await follow(gone!), { code: 4410, reason: SAID });

  const logs = await runCliHere(['logs', gone!], {
    env: { ...CHILD_ENV, UCOMPUTE_URL: `http://127.0.0.1:${port}`, UCOMPUTE_TOKEN: token },
  });
  assert.equal(logs.stdout, '', logs.stderr);
  assert.match(
    logs.stderr,
    new RegExp(
      `job ${gone}: the job's logs are gone: removed with its kept folder \\(local\\.retainedLogsBytes`,
    ),
  );

  // While the backend has them, the logs are read as before.
  assert.deepEqual(await follow(kept!), { code: 1000, reason: 'the job has ended' });
});
