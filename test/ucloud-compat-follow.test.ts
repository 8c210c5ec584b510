import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import WebSocket from 'ws';
import type { Caller } from '../src/jobs/service.ts';
import { FollowMessage } from '../src/server/schemas.ts';
import { jobInState } from './support/server.ts';
import { createFrom, fixture, type World, world } from './support/ucloud.ts';

/**
 * UCloud's WebSocket protocol at /api/jobs, as its web client speaks it (View.tsx and ws.ts; the
 * call in test/fixtures/ucloud-requests/follow-web-client.json), over a real loopback socket.
 */

const ADMIN: Caller = { username: 'root', admin: true };

interface Frame {
  type: 'message' | 'response';
  streamId: string;
  payload?: FollowMessage & { why?: string };
  status?: number;
}

interface Connection {
  ws: WebSocket;
  frames: Frame[];
  /** Resolves with the first frame (already received or not) that satisfies `predicate`. */
  until(predicate: (f: Frame) => boolean): Promise<Frame>;
}

/** Opens the socket as UCloud's client does: no token on the upgrade, the bearer in each call. */
function connect(url: string): Promise<Connection> {
  const ws = new WebSocket(url);
  const frames: Frame[] = [];
  const waiters = new Set<() => void>();
  ws.on('message', (data) => {
    frames.push(JSON.parse(String(data)) as Frame);
    for (const w of [...waiters]) w();
  });
  const until = (predicate: (f: Frame) => boolean) =>
    new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no such frame; got ${JSON.stringify(frames)}`)),
        10_000,
      );
      const check = () => {
        const found = frames.find(predicate);
        if (!found) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      waiters.add(check);
      check();
    });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, frames, until }));
    ws.once('error', reject);
  });
}

const followCall = (id: string, token: string, streamId = '0') =>
  JSON.stringify({
    ...JSON.parse(
      JSON.stringify(fixture('follow-web-client').request).replaceAll('$JOB', id).replaceAll('$TOKEN', token),
    ),
    streamId,
  });

describe("following jobs with UCloud's WebSocket protocol", () => {
  let w: World;
  let url: string;
  before(async () => {
    w = await world();
    await w.app.listen({ port: 0, host: '127.0.0.1' });
    url = `ws://127.0.0.1:${(w.app.server.address() as AddressInfo).port}/api/jobs`;
  });
  after(() => w.close());

  test('initialJob first, then log with its channel, updates and newStatus, and a final response', async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const c = await connect(url);
    c.ws.send(followCall(id, w.token));
    const first = await c.until(() => true);
    assert.equal(first.type, 'message');
    assert.equal(first.streamId, '0');
    assert.equal(first.payload?.initialJob?.id, id);
    assert.equal(first.payload?.initialJob?.status.resolvedApplication?.metadata.name, 'word-count');
    assert.equal(first.payload?.newStatus?.state, 'RUNNING');
    const logged = await c.until((f) => (f.payload?.log.length ?? 0) > 0);
    assert.deepEqual(
      logged.payload?.log.map((l) => [l.rank, l.channel]),
      [[0, null]],
    );
    await w.service.terminate(ADMIN, [id]);
    const ended = await c.until((f) => f.payload?.newStatus?.state === 'SUCCESS');
    assert.equal(ended.type, 'message');
    const last = await c.until((f) => f.type === 'response');
    assert.deepEqual(last, { type: 'response', streamId: '0', status: 200 });
    for (const frame of c.frames.filter((f) => f.type === 'message')) {
      assert.ok(Value.Check(FollowMessage, frame.payload), JSON.stringify(frame.payload));
    }
    c.ws.close();
  });

  test('one socket carries several streams; refusals end only their own stream', async () => {
    const id = await createFrom(w, 'create-web-client');
    await jobInState(w, id, 'RUNNING');
    const c = await connect(url);
    c.ws.send(followCall(id, 'not-a-token', 'bad-token'));
    c.ws.send(followCall(id, w.bobToken, 'others-job'));
    c.ws.send(followCall('nosuchjob', w.token, 'no-such-job'));
    c.ws.send(JSON.stringify({ call: 'jobs.browse', streamId: 'other-call', payload: {}, bearer: w.token }));
    c.ws.send('not json');
    c.ws.send(followCall(id, w.token, 'good'));
    const status = async (streamId: string) => (await c.until((f) => f.streamId === streamId)).status;
    assert.equal(await status('bad-token'), 401);
    assert.equal(await status('others-job'), 404, "another user's job is not found");
    assert.equal(await status('no-such-job'), 404);
    assert.equal(await status('other-call'), 404);
    // Not a call at all: answered on UCloud's stream id for unknown streams.
    assert.equal(await status('unknown'), 400);
    assert.equal(await status('good'), undefined, 'the good stream is a message');
    assert.equal(
      c.frames.filter((f) => f.streamId === 'others-job' && f.type === 'message').length,
      0,
      "nothing of another user's job was sent",
    );
    c.ws.close();
  });

  test('a plain GET /api/jobs asks for the WebSocket upgrade', async () => {
    const r = await w.app.inject({ method: 'GET', url: '/api/jobs' });
    assert.equal(r.statusCode, 426);
    assert.equal(r.json().errorCode, 'UPGRADE_REQUIRED');
  });
});
