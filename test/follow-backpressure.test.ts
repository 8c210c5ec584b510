import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { LogChunk } from '../src/jobs/backend.ts';
import { jobInState, testServer } from './support/server.ts';
import { openTestStore, userWithCredits } from './support/store.ts';

const CHUNK = 'x'.repeat(64 * 1024);
const OFFERED = 5000; // 320 MB, if a reader took it all

test('a follower that reads nothing holds the server to a bounded number of log chunks', async (t) => {
  const store = await openTestStore();
  const token = await userWithCredits(store, 'alice');
  let pulled = 0;
  const dry = dryBackend({ runForMs: null });
  const backend = {
    ...dry,
    async *logs(): AsyncGenerator<LogChunk> {
      for (; pulled < OFFERED; pulled++) yield { rank: 0, stdout: CHUNK };
    },
  };
  const server = await testServer(store, backend);
  t.after(() => server.close());
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (server.app.server.address() as AddressInfo).port;
  const created = await server.app.inject({
    method: 'POST',
    url: '/api/jobs',
    headers: { authorization: `Bearer ${token}` },
    payload: {
      items: [
        {
          application: { name: 'mpi-hello', version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
        },
      ],
    },
  });
  assert.equal(created.statusCode, 200, created.body);
  const id = (created.json() as { responses: { id: string }[] }).responses[0]!.id;
  await jobInState(server, id, 'RUNNING');

  // A client that completes the upgrade and then never reads.
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `GET /api/jobs/follow?id=${id} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`,
  );
  socket.pause();
  await sleep(3000);
  socket.destroy();
  // Socket buffers on both sides hold some megabytes; the server stops reading the log beyond that.
  assert.ok(pulled < 1000, `the server read ${pulled} chunks of 64 KiB for a client that took none`);
});
