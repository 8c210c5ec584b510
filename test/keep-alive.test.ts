import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Served, startServe, stopServe } from './support/serve.ts';

/**
 * A client reuses an idle keep-alive connection; the server, slow at that moment (a loaded
 * machine), reads the request only after its keep-alive time would have run out. Node's own 5 s
 * then closes the connection under the waiting request: the client gets ECONNRESET (crash.test.ts
 * failed so at a load of 29). The server keeps idle connections longer than clients do.
 */

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-keep-alive-'));
let served: Served | undefined;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('kept-alive connections', () => {
  after(async () => {
    await stopServe(served);
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Well past Node's default keep-alive time (5 s), which the server once had (6.5 s reset it in 3 of 3). */
  const SLOW_FOR_MS = 8000;

  /** GET `url` through `agent`: the status, and whether the request went on a connection kept alive. */
  function request(url: string, agent: Agent): Promise<{ status?: number; reused: boolean }> {
    return new Promise((resolve, reject) => {
      const req = get(url, { agent }, (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode, reused: req.reusedSocket }));
      });
      req.on('error', reject);
    });
  }

  test('a request on a kept-alive connection is answered when the server reads it late', {
    timeout: 300_000,
  }, async () => {
    served = await startServe(join(tmp, 'data'));
    // One connection, kept alive: the second request goes on the first one's.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.deepEqual(await request(`${served.url}/healthz`, agent), { status: 200, reused: false });
      // The server's process stops (as a starved one does); the request waits in its socket.
      served.child.kill('SIGSTOP');
      const second = request(`${served.url}/healthz`, agent).catch(
        (error: NodeJS.ErrnoException) => error.code,
      );
      try {
        await sleep(SLOW_FOR_MS);
      } finally {
        served.child.kill('SIGCONT');
      }
      assert.deepEqual(await second, { status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });
});
