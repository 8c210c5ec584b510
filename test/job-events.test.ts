import assert from 'node:assert/strict';
import { get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Caller, JobEvent, JobService, Watch } from '../src/jobs/service.ts';
import type { Job } from '../src/model/job.ts';
import { EVENTS_BUFFERED_BYTES, streamJobEvents } from '../src/server/job-events.ts';
import { eventStreamParser, type Received } from './support/event-stream.ts';
import { type TestServer, testServer } from './support/server.ts';
import { openTestStore, userWithCredits } from './support/store.ts';
import { until } from './support/until.ts';

/**
 * /api/jobs/events (issue 13): one stream of server-sent events with the changes of every job the
 * caller sees, resumable by Last-Event-ID, bounded per client, and ended with the sign-in.
 */

const YEAR = 365 * 24 * 3600 * 1000;
const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const sleepy = { application: { name: 'file-server', version: '1.0' }, product: STANDARD_1, parameters: {} };

interface World extends TestServer {
  port: number;
  tokens: { alice: string; bob: string; carol: string };
}

/** alice and bob have credits; carol leads project `climate`, where bob is a USER member. */
async function world(): Promise<World> {
  const store = await openTestStore();
  const now = Date.now();
  const tokens = {
    alice: await userWithCredits(store, 'alice'),
    bob: await userWithCredits(store, 'bob'),
    carol: await userWithCredits(store, 'carol'),
  };
  await store.users.createProject('climate', 'Climate');
  await store.users.setMember('climate', 'carol', 'PI');
  await store.users.setMember('climate', 'bob', 'USER');
  await store.accounting.grant('project:climate', 'u1-standard', 1_000_000, now - 1000, now + YEAR);
  const server = await testServer(store);
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  return { ...server, port: (server.app.server.address() as AddressInfo).port, tokens };
}

interface Stream {
  status: number;
  received: Received[];
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens the event stream with the given headers and parses what arrives. */
function openEvents(w: World, headers: Record<string, string>): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = get({ host: '127.0.0.1', port: w.port, path: '/api/jobs/events', headers }, (res) => {
      const received: Received[] = [];
      res.setEncoding('utf8');
      res.on('data', eventStreamParser(received));
      const ended = new Promise<void>((done) => res.on('close', () => done()));
      resolve({ status: res.statusCode ?? 0, received, ended, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function create(w: World, token: string, project?: string): Promise<string> {
  const answer = await w.app.inject({
    method: 'POST',
    url: '/api/jobs',
    headers: { ...bearer(token), ...(project ? { project } : {}) },
    payload: { items: [sleepy] },
  });
  assert.equal(answer.statusCode, 200, answer.body);
  return (answer.json() as { responses: { id: string }[] }).responses[0]?.id ?? '';
}

const jobsIn = (s: Stream) => s.received.filter((r) => r.event === 'job').map((r) => r.data as Job);
const statesOf = (s: Stream, id: string) =>
  jobsIn(s)
    .filter((j) => j.id === id)
    .map((j) => j.status.state);

describe('the job event stream', () => {
  let w: World;
  before(async () => {
    w = await world();
  });
  after(() => w.close());

  test('needs a sign-in', async () => {
    const s = await openEvents(w, {});
    assert.equal(s.status, 401);
    s.close();
  });

  test("a caller gets their own and their projects' jobs as they change, never another user's", async () => {
    const alice = await openEvents(w, bearer(w.tokens.alice));
    const carol = await openEvents(w, bearer(w.tokens.carol));
    assert.equal(alice.status, 200);
    await until(() => alice.received.some((r) => r.event === 'ready'), { describe: 'ready' });
    await until(() => carol.received.some((r) => r.event === 'ready'), { describe: 'ready' });

    const own = await create(w, w.tokens.alice);
    const bobs = await create(w, w.tokens.bob);
    const bobsInClimate = await create(w, w.tokens.bob, 'climate');
    await until(() => statesOf(alice, own).includes('RUNNING'), { describe: 'alice sees her job running' });
    assert.deepEqual(statesOf(alice, own).slice(0, 1), ['IN_QUEUE']);
    await until(() => statesOf(carol, bobsInClimate).includes('RUNNING'), {
      describe: 'carol sees the project job running',
    });
    await w.service.terminate({ username: 'alice', admin: false }, [own]);
    await until(() => statesOf(alice, own).includes('SUCCESS'), { describe: 'alice sees her job end' });

    assert.deepEqual(statesOf(alice, bobs), []);
    assert.deepEqual(statesOf(alice, bobsInClimate), []);
    assert.deepEqual(statesOf(carol, bobs), [], "a project's PI does not see a member's own jobs");
    assert.deepEqual(statesOf(carol, own), []);
    // Each event is the job as browse shows it, with its id resumable.
    const last = jobsIn(alice).at(-1);
    assert.equal(last?.specification.application.name, 'file-server');
    // Numbered in the order of commit, whichever replica wrote them.
    const ids = alice.received.map((r) => Number(r.id));
    assert.ok(
      ids.every((id, i) => Number.isSafeInteger(id) && (i === 0 || id > ids[i - 1]!)),
      `${ids}`,
    );
    alice.close();
    carol.close();
  });

  test('a renamed job is sent with its new name', async () => {
    const alice = await openEvents(w, bearer(w.tokens.alice));
    const id = await create(w, w.tokens.alice);
    await w.service.rename({ username: 'alice', admin: false }, [{ id, newTitle: 'renamed' }]);
    await until(() => jobsIn(alice).some((j) => j.id === id && j.specification.name === 'renamed'), {
      describe: 'the new name',
    });
    alice.close();
  });

  test('a client that reconnects with Last-Event-ID gets what it missed, or resync', async () => {
    const alice = await openEvents(w, bearer(w.tokens.alice));
    await until(() => alice.received.some((r) => r.event === 'ready'), { describe: 'ready' });
    const first = await create(w, w.tokens.alice);
    await until(() => statesOf(alice, first).includes('RUNNING'), { describe: 'the first job' });
    const lastSeen = alice.received.at(-1)?.id ?? '';
    // Another watcher keeps the server remembering while alice is away: he comes before she goes.
    const bob = await openEvents(w, bearer(w.tokens.bob));
    await until(() => bob.received.some((r) => r.event === 'ready'), { describe: 'ready' });
    alice.close();
    await alice.ended;
    const missed = await create(w, w.tokens.alice);
    const bobs = await create(w, w.tokens.bob);
    await until(() => statesOf(bob, bobs).includes('RUNNING'), { describe: 'bob sees his job' });
    await until(async () => (await w.store.jobs.get(missed))?.state === 'RUNNING', {
      describe: 'the missed job runs',
    });

    const back = await openEvents(w, { ...bearer(w.tokens.alice), 'last-event-id': lastSeen });
    await until(() => back.received.some((r) => r.event === 'ready'), { describe: 'ready' });
    // Every change missed (created, running), each the job as read when resumed.
    assert.ok(statesOf(back, missed).length >= 2, `${statesOf(back, missed)}`);
    assert.equal(statesOf(back, missed).at(-1), 'RUNNING');
    assert.deepEqual(statesOf(back, bobs), []);
    assert.deepEqual(statesOf(back, first), []);
    back.close();

    const unknown = await openEvents(w, { ...bearer(w.tokens.alice), 'last-event-id': 'elsewhere-12' });
    await until(() => unknown.received.some((r) => r.event === 'resync'), { describe: 'resync' });
    assert.equal(
      unknown.received.some((r) => r.event === 'ready'),
      false,
    );
    unknown.close();
    bob.close();
  });

  test('a stream signed in by the cookie works without a CSRF token and ends when it signs out', async () => {
    const signIn = await w.app.inject({
      method: 'POST',
      url: '/api/auth/session',
      payload: { token: w.tokens.alice },
    });
    assert.equal(signIn.statusCode, 200, signIn.body);
    const cookie = String(signIn.headers['set-cookie']).split(';')[0] ?? '';
    const { csrfToken } = signIn.json() as { csrfToken: string };

    const s = await openEvents(w, { cookie });
    assert.equal(s.status, 200);
    const id = await create(w, w.tokens.alice);
    await until(() => statesOf(s, id).includes('RUNNING'), { describe: 'the job by cookie' });

    const out = await w.app.inject({
      method: 'DELETE',
      url: '/api/auth/session',
      headers: { cookie, 'x-csrf-token': csrfToken },
    });
    assert.equal(out.statusCode, 204, out.body);
    let ended = false;
    void s.ended.then(() => {
      ended = true;
    });
    await until(() => ended, { describe: 'the stream to end' });
    s.close();
  });
});

describe('a client that does not keep up', () => {
  const caller: Caller = { username: 'alice', admin: false };
  const job = { id: 'j1', status: { state: 'RUNNING' } } as unknown as Job;

  /**
   * A service whose watch hands out the listener, and a sink whose backlog the test sets. The stream
   * does each step after it asked whether the sign-in holds, in order: `settled` answers once every
   * step told so far is done (a check queued after them has asked).
   */
  async function fixture() {
    let listener: (e: JobEvent) => void = () => {};
    let asked = 0;
    const service = {
      async watchJobs(_c: Caller, _last: string | undefined, l: (e: JobEvent) => void): Promise<Watch> {
        listener = l;
        return { position: 'e-0', missed: [], unsubscribe: () => {} };
      },
    } as unknown as JobService;
    const sink = { written: [] as string[], backlog: 0, ended: false };
    const stream = streamJobEvents(
      service,
      caller,
      {
        write: (text) => {
          sink.written.push(text);
          sink.backlog += text.length;
        },
        buffered: () => sink.backlog,
        end: () => {
          sink.ended = true;
        },
      },
      {
        signedIn: async () => {
          asked++;
          return true;
        },
      },
    );
    const settled = async () => {
      const before = asked;
      stream.check();
      await until(() => asked > before, { describe: 'the steps told so far are done' });
    };
    await until(() => sink.written.some((t) => t.includes('event: ready')), {
      describe: 'the stream is ready',
    });
    return { emit: (n: number) => listener({ id: `e-${n}`, job }), sink, stream, settled };
  }

  test('has its backlog dropped, then gets one resync once it drains', async () => {
    const { emit, sink, stream, settled } = await fixture();
    sink.backlog = EVENTS_BUFFERED_BYTES + 1;
    const before = sink.written.length;
    for (let n = 1; n <= 1000; n++) emit(n);
    await settled();
    assert.equal(sink.written.length, before, 'nothing is queued while the client is behind');

    sink.backlog = 0;
    stream.check();
    await until(() => /^id: e-1000\nevent: resync\n/.test(sink.written.at(-1) ?? ''), {
      describe: 'one resync, at the last event dropped',
    });
    emit(1001);
    await until(() => /^id: e-1001\nevent: job\n/.test(sink.written.at(-1) ?? ''), {
      describe: 'the next event is sent',
    });
    await settled();
    assert.equal(sink.written.filter((t) => t.includes('event: resync')).length, 1);
    stream.stop();
  });

  test('a client that catches up in time loses nothing', async () => {
    const { emit, sink, stream, settled } = await fixture();
    for (let n = 1; n <= 10; n++) emit(n);
    await settled();
    assert.equal(sink.written.filter((t) => t.includes('event: job')).length, 10);
    assert.equal(
      sink.written.some((t) => t.includes('resync')),
      false,
    );
    stream.stop();
  });
});
