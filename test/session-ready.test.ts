import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { CHILD_ENV, runCliHere } from './support/cli.ts';
import { call, runningJob, type World, world } from './support/interactive.ts';
import { until } from './support/until.ts';

/**
 * The "starting…" wait: a session is ready once the job runs and its app answers in its own
 * protocol (an HTTP status line from a web app, the RFB greeting from a desktop), not merely once
 * a port accepts; the wait is a long poll that answers as soon as that happens.
 */

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const spec = (name: string) => ({
  application: { name, version: '1.0' },
  product: STANDARD_1,
  parameters: {},
});

describe('session readiness', { timeout: 60_000 }, () => {
  let w: World;
  /** What the job's ports do: refuse connections, accept and stay silent, or answer. */
  let mode: 'refuse' | 'silent' | 'answer' = 'refuse';
  let rfb: Server;
  let silent: Server;
  const port = (s: Server) => (s.address() as { port: number }).port;

  before(async () => {
    rfb = createServer((socket) => socket.end('RFB 003.008\n'));
    silent = createServer(() => {});
    await Promise.all([rfb, silent].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))));
    w = await world({
      backend: (appPort) => ({
        connect: async (_jobId, _rank, jobPort) => {
          if (mode === 'refuse') throw new Error('connect ECONNREFUSED');
          const to = mode === 'silent' ? port(silent) : jobPort === 5900 ? port(rfb) : appPort;
          const socket = connect(to, '127.0.0.1');
          await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
          return socket;
        },
      }),
    });
  });
  after(async () => {
    await w.close();
    for (const s of [rfb, silent]) {
      s.close();
    }
  });

  async function get(path: string, who: 'alice' | 'bob' = 'alice') {
    const answer = await call(w.port, {
      host: `localhost:${w.port}`,
      path,
      headers: { authorization: `Bearer ${w.tokens[who]}` },
    });
    return { status: answer.status, json: JSON.parse(answer.body) };
  }

  const running = (name: string) => runningJob(w, spec(name));

  test('a web app is ready once it answers HTTP; the long poll answers as soon as it does', async () => {
    mode = 'refuse';
    const id = await running('file-server');
    const now = await get(`/api/jobs/interactiveSession/ready?id=${id}`);
    assert.equal(now.status, 200, JSON.stringify(now.json));
    assert.deepEqual(
      { state: now.json.state, ready: now.json.ready, sessionType: now.json.sessionType },
      { state: 'RUNNING', ready: false, sessionType: 'WEB' },
    );
    mode = 'silent';
    assert.equal(
      (await get(`/api/jobs/interactiveSession/ready?id=${id}`)).json.ready,
      false,
      'a port that accepts is not enough',
    );
    const waiting = get(`/api/jobs/interactiveSession/ready?id=${id}&waitMs=20000`);
    mode = 'answer';
    assert.equal((await waiting).json.ready, true, 'the wait saw the app answer');
  });

  test('a desktop is ready once it sends the RFB greeting; a shell once the job runs', async () => {
    mode = 'silent';
    const desktop = await running('desktop');
    const silentDesktop = await get(`/api/jobs/interactiveSession/ready?id=${desktop}`);
    assert.deepEqual([silentDesktop.json.sessionType, silentDesktop.json.ready], ['VNC', false]);
    mode = 'answer';
    assert.equal((await get(`/api/jobs/interactiveSession/ready?id=${desktop}`)).json.ready, true);
    mode = 'refuse';
    const terminal = await running('terminal');
    const shell = await get(`/api/jobs/interactiveSession/ready?id=${terminal}`);
    assert.deepEqual([shell.json.sessionType, shell.json.ready], ['SHELL', true]);
  });

  test('ucompute open waits, saying so, until the app answers, then prints its link', async () => {
    mode = 'refuse';
    const id = await running('file-server');
    const polls = () => w.logLines.filter((l) => l.includes('/api/jobs/interactiveSession/ready')).length;
    const before = polls();
    const opening = runCliHere(['open', id, '--url-only', '--url', `http://127.0.0.1:${w.port}`], {
      env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
    });
    // Its first wait ends without an answer (the probe is refused) before the app comes up.
    await until(() => polls() > before, {
      describe: 'the CLI asks whether the app is ready',
      timeout: 60_000,
    });
    mode = 'answer';
    const result = await opening;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /the job runs; waiting for its app to answer/);
    assert.match(
      result.stdout,
      new RegExp(`^http://app-${id}-0\\.localhost:${w.port}/_ucompute/authorize\\?ticket=`),
    );
  });

  test("others' jobs are not found, ranks the job lacks are refused, an ended job answers at once", async () => {
    mode = 'answer';
    const id = await running('file-server');
    assert.equal((await get(`/api/jobs/interactiveSession/ready?id=${id}`, 'bob')).status, 404);
    const rank = await get(`/api/jobs/interactiveSession/ready?id=${id}&rank=3`);
    assert.equal(rank.status, 400);
    assert.match(rank.json.message, /rank: must be a rank of the job, 0 to 0/);
    await w.service.terminate({ username: 'alice', admin: false }, [id]);
    await until(async () => (await w.store.jobs.get(id))?.state !== 'RUNNING', { describe: 'the job ends' });
    const ended = await get(`/api/jobs/interactiveSession/ready?id=${id}&waitMs=20000`);
    assert.equal(ended.json.ready, false);
    assert.notEqual(ended.json.state, 'RUNNING');
  });
});
