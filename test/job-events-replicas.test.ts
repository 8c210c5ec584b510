import assert from 'node:assert/strict';
import { get } from 'node:http';
import { test } from 'node:test';
import WebSocket from 'ws';
import type { Job } from '../src/model/job.ts';
import { eventStreamParser, type Received } from './support/event-stream.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { leaderOtherThan, type Replica, type ReplicaSet, startReplicas } from './support/replicas.ts';
import { until } from './support/until.ts';

/**
 * Events across replicas (issue 21 item 3): three `ucompute serve` replicas on one PostgreSQL
 * database. A client streams /api/jobs/events from a follower (the leader writes the jobs' moves),
 * its replica is killed, and it resumes on another with its Last-Event-ID: every event once, in
 * order, none missing, no resync. A follow WebSocket on a follower sees its job to the end.
 */

const job = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: {},
};

/** /api/jobs/events on a replica, parsed as it arrives. */
function openEvents(replica: Replica, token: string, lastEventId?: string) {
  const received: Received[] = [];
  const req = get(`${replica.url}/api/jobs/events`, {
    headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  });
  const ended = new Promise<void>((done) => {
    req.on('error', () => done());
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', eventStreamParser(received));
      res.on('close', () => done());
      res.on('error', () => done());
    });
  });
  return { received, ended, close: () => req.destroy() };
}

async function submit(set: ReplicaSet, replica: Replica, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await fetch(`${replica.url}/api/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${set.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [job] }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    ids.push(...((await response.json()) as { responses: { id: string }[] }).responses.map((r) => r.id));
  }
  return ids;
}

const jobEvents = (received: Received[]) => received.filter((r) => r.event === 'job');

test('job events reach every replica, and a stream resumes on another replica without gaps', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed (CI=true fails instead)',
  timeout: 240_000,
}, async (t) => {
  const set = await startReplicas(t, undefined, await newPostgresDatabase(), 3, {
    config: { dry: { runForMs: 300 }, accounting: { initialCredits: 1_000_000_000 } },
  });
  const leader = await leaderOtherThan(set, undefined);
  const [streamed, resumed] = set.replicas.filter((r) => r !== leader.replica) as [Replica, Replica];

  const first = openEvents(streamed, set.token);
  t.after(() => first.close());
  await until(() => first.received.find((r) => r.event === 'ready'), { describe: 'the first stream ready' });
  const start = Number(first.received.find((r) => r.event === 'ready')!.id);

  // A follower's follow WebSocket sees the leader's writes of its job, to the end.
  const [followed] = await submit(set, resumed, 1);
  const socket = new WebSocket(`${resumed.url.replace(/^http/, 'ws')}/api/jobs/follow?id=${followed}`, {
    headers: { authorization: `Bearer ${set.token}` },
  });
  const messages: { newStatus?: { state: string } }[] = [];
  socket.on('message', (data) => messages.push(JSON.parse(String(data))));
  const closed = new Promise<number>((done) => socket.on('close', (code) => done(code)));
  t.after(() => socket.terminate());

  const before = [...(await submit(set, leader.replica, 5)), ...(await submit(set, resumed, 5))];
  assert.equal(await closed, 1000, JSON.stringify(messages));
  assert.equal(messages.at(-1)?.newStatus?.state, 'SUCCESS', JSON.stringify(messages));
  const ended = (received: Received[], ids: string[]) =>
    ids.every((id) =>
      jobEvents(received).some(
        (r) => (r.data as Job).id === id && (r.data as Job).status.state === 'SUCCESS',
      ),
    );
  await until(() => ended(first.received, before), {
    describe: 'the follower streams every job to its end',
    timeout: 60_000,
  });

  streamed.child.kill('SIGKILL');
  await streamed.exited;
  await first.ended;
  const lastSeen = jobEvents(first.received).at(-1)!.id;
  // Missed while away, written by the leader and another follower.
  const during = [...(await submit(set, leader.replica, 5)), ...(await submit(set, resumed, 5))];
  await until(
    async () => {
      const { rows } = await set.db.query(`select count(*)::int as n from jobs where state = 'SUCCESS'`);
      return (rows[0] as { n: number }).n === 1 + before.length + during.length;
    },
    { describe: 'every job ended', timeout: 60_000 },
  );

  const second = openEvents(resumed, set.token, lastSeen);
  t.after(() => second.close());
  const { rows } = await set.db.query('select seq from job_events where seq > $1 order by seq', [start]);
  const expected = rows.map((r: { seq: string }) => Number(r.seq));
  await until(() => jobEvents(second.received).at(-1)?.id === String(expected.at(-1)), {
    describe: 'the resumed stream has the newest event',
    timeout: 30_000,
  });
  assert.equal(second.received.filter((r) => r.event === 'resync').length, 0, 'no resync');
  const seen = [...jobEvents(first.received), ...jobEvents(second.received)].map((r) => Number(r.id));
  assert.deepEqual(seen, expected, 'every event once, in order, across the two replicas');
  assert.ok(ended(second.received, during), 'the missed jobs are told to their end');
});
