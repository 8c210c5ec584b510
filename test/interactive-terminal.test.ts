import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import type { ShellOptions } from '../src/jobs/backend.ts';
import { hashToken } from '../src/store/users.ts';
import { assertExit, BIN, CHILD_ENV, runCliHere } from './support/cli.ts';
import { call, runningJob, type World, world } from './support/interactive.ts';
import { until } from './support/until.ts';

/**
 * The terminal protocol, the VNC relay and their pages, over a backend whose shell is a small
 * line-echoing fake and whose `connect` reaches a TCP echo server standing in for a VNC server.
 */

const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };
const desktop = { application: { name: 'desktop', version: '1.0' }, product: STANDARD_1, parameters: {} };

/** What the fake shells saw; `kill` ends one as its job's end would (SIGTERM). */
const shells: { jobId: string; rank: number; sizes: ShellOptions[]; input: string[]; kill: () => void }[] =
  [];

/**
 * A "shell" that answers every input with `you said: <input>` and ends on `exit [code]` (its
 * output ends; like a pty's, the stream does not close), with that exit code.
 */
function fakeShell(jobId: string, rank: number, size: ShellOptions) {
  let exited!: (code: number) => void;
  const exitCode = new Promise<number>((resolve) => {
    exited = resolve;
  });
  const kill = () => {
    stream.push(null);
    exited(143);
  };
  const record = { jobId, rank, sizes: [size], input: [] as string[], kill };
  shells.push(record);
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      const text = chunk.toString();
      record.input.push(text);
      const exit = /^exit(?: (\d+))?$/.exec(text);
      if (exit) {
        stream.push(null);
        exited(Number(exit[1] ?? 0));
      } else stream.push(`you said: ${text}`);
      done();
    },
  });
  return Object.assign(stream, { resize: (o: ShellOptions) => record.sizes.push(o), exitCode });
}

let echo: Server;

async function open(w: World, id: string, sessionType: string, rank = 0) {
  const answer = await call(w.port, {
    host: `localhost:${w.port}`,
    path: '/api/jobs/interactiveSession',
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [{ id, rank, sessionType }] }),
  });
  assert.equal(answer.status, 200, answer.body);
  return JSON.parse(answer.body).responses[0].session;
}

interface Conversation {
  messages: { type: string; data?: string }[];
  closed: Promise<{ code: number; reason: string }>;
  socket: WebSocket;
}

async function terminal(w: World): Promise<Conversation> {
  const socket = new WebSocket(`ws://127.0.0.1:${w.port}/api/jobs/shell`);
  const messages: Conversation['messages'] = [];
  socket.on('message', (data) => messages.push(JSON.parse(String(data))));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  return { messages, closed, socket };
}

describe('the terminal', { timeout: 60_000 }, () => {
  let w: World;
  let id: string;
  before(async () => {
    w = await world({
      backend: () => ({ shell: async (jobId, rank, size) => fakeShell(jobId, rank, size) }),
    });
    id = await runningJob(w, desktop);
  });
  after(() => w.close());

  test('initialize, input with ack, resize, and closed when the shell ends', async () => {
    const { sessionIdentifier } = await open(w, id, 'SHELL');
    const t = await terminal(w);
    t.socket.send(JSON.stringify({ type: 'initialize', sessionIdentifier, cols: 100, rows: 30 }));
    await until(() => shells.length === 1, { describe: 'a shell is opened' });
    t.socket.send(JSON.stringify({ type: 'input', data: 'echo $((6*7))' }));
    await until(() => t.messages.some((m) => m.type === 'data'), { describe: 'the terminal sends data' });
    assert.ok(t.messages.some((m) => m.type === 'ack'));
    assert.deepEqual(
      t.messages.filter((m) => m.type === 'data'),
      [{ type: 'data', data: 'you said: echo $((6*7))' }],
    );
    t.socket.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
    t.socket.send(JSON.stringify({ type: 'input', data: 'exit' }));
    const closed = await t.closed;
    assert.equal(closed.code, 1000);
    assert.deepEqual(t.messages.at(-1), { type: 'closed', exitCode: 0 });
    const { kill: _, ...seen } = shells[0]!;
    assert.deepEqual(seen, {
      jobId: id,
      rank: 0,
      sizes: [
        { cols: 100, rows: 30 },
        { cols: 120, rows: 40 },
      ],
      input: ['echo $((6*7))', 'exit'],
    });
  });

  test('input sent right after initialize waits for the shell', async () => {
    const { sessionIdentifier } = await open(w, id, 'SHELL');
    const t = await terminal(w);
    t.socket.send(JSON.stringify({ type: 'initialize', sessionIdentifier, cols: 80, rows: 24 }));
    t.socket.send(JSON.stringify({ type: 'input', data: 'early' }));
    t.socket.send(JSON.stringify({ type: 'input', data: 'exit' }));
    assert.equal((await t.closed).code, 1000);
    assert.deepEqual(
      t.messages.filter((m) => m.type === 'data'),
      [{ type: 'data', data: 'you said: early' }],
    );
  });

  test('a session identifier opens one terminal only', async () => {
    const { sessionIdentifier } = await open(w, id, 'SHELL');
    const first = await terminal(w);
    first.socket.send(JSON.stringify({ type: 'initialize', sessionIdentifier, cols: 80, rows: 24 }));
    await until(() => shells.length === 3, { describe: 'three shells are opened' });
    const second = await terminal(w);
    second.socket.send(JSON.stringify({ type: 'initialize', sessionIdentifier, cols: 80, rows: 24 }));
    assert.equal((await second.closed).code, 4401);
    first.socket.close();
  });

  test('an unknown, expired or web session identifier opens nothing', async () => {
    const expired = await open(w, id, 'SHELL');
    const hash = hashToken(expired.sessionIdentifier);
    await w.store.sessions.touch(hash, Date.now() - 10 * 60_000, Date.now() - 5 * 60_000);
    const vnc = await open(w, id, 'VNC');
    const before = shells.length;
    for (const sessionIdentifier of ['nope', expired.sessionIdentifier, new URL(vnc.url).hash.slice(1)]) {
      const t = await terminal(w);
      t.socket.send(JSON.stringify({ type: 'initialize', sessionIdentifier, cols: 80, rows: 24 }));
      assert.equal((await t.closed).code, 4401, sessionIdentifier);
    }
    assert.equal(shells.length, before);
  });

  test('ucompute shell: input in, output out, exit code 0 when the shell ends', async () => {
    const child = spawn(process.execPath, [BIN, 'shell', id, '--url', `http://127.0.0.1:${w.port}`], {
      env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const before = shells.length;
    await until(() => shells.length === before + 1, { describe: 'one more shell is opened' });
    child.stdin.write('hello');
    await until(() => stdout.includes('you said: hello'), { describe: 'the shell answers' });
    child.stdin.write('exit');
    assert.equal(await exited, 0);
  });

  test("ucompute shell exits with the shell's exit code, as ssh does", async () => {
    const child = spawn(process.execPath, [BIN, 'shell', id, '--url', `http://127.0.0.1:${w.port}`], {
      env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const before = shells.length;
    await until(() => shells.length === before + 1, { describe: 'one more shell is opened' });
    child.stdin.write('exit 3');
    assert.equal(await exited, 3);
  });

  test('ucompute shell of a job cancelled under it says so and exits 130', async () => {
    const doomed = await runningJob(w, desktop);
    const child = spawn(process.execPath, [BIN, 'shell', doomed, '--url', `http://127.0.0.1:${w.port}`], {
      env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await until(() => shells.some((shell) => shell.jobId === doomed), {
      describe: 'a shell is opened in the job',
    });
    const cancelled = await call(w.port, {
      host: `localhost:${w.port}`,
      path: '/api/jobs/terminate',
      method: 'POST',
      headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ id: doomed }] }),
    });
    assert.equal(cancelled.status, 200, cancelled.body);
    shells.find((shell) => shell.jobId === doomed)!.kill();
    assert.equal(await exited, 130, stderr);
    assert.match(stderr, new RegExp(`^${doomed}: SUCCESS, cancelled by alice$`, 'm'));
  });

  test('ucompute open --no-wait prints the one-time link of a desktop', async () => {
    const result = await runCliHere(
      ['open', id, '--url-only', '--no-wait', '--url', `http://127.0.0.1:${w.port}`],
      {
        env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice },
      },
    );
    assertExit(result, 0);
    const url = new URL(result.stdout.trim());
    assert.equal(url.pathname, '/sessions/vnc');
    assert.equal((await w.store.sessions.get(hashToken(url.hash.slice(1))))?.kind, 'VNC');
  });

  test('ucompute open hands the browser a private page leading to the link, never the link', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'ucompute-open-'));
    const seen = join(folder, 'browser-args');
    const browser = join(folder, 'browser.sh');
    // Written aside, then renamed: the file appears whole, never empty between `>` and printf.
    writeFileSync(browser, `#!/bin/sh\nprintf '%s\\n' "$@" > '${seen}.part'\nmv '${seen}.part' '${seen}'\n`, {
      mode: 0o755,
    });
    const result = await runCliHere(['open', id, '--no-wait', '--url', `http://127.0.0.1:${w.port}`], {
      env: { ...CHILD_ENV, UCOMPUTE_TOKEN: w.tokens.alice, BROWSER: browser },
    });
    assertExit(result, 0);
    const [link = '', said] = result.stdout.trim().split('\n');
    assert.equal(said, 'opened in your browser');
    await until(() => existsSync(seen), { describe: 'the command ran' });
    const args = readFileSync(seen, 'utf8').trim();
    assert.ok(!args.includes(new URL(link).hash.slice(1)), 'the secret is not on the command line');
    const page = fileURLToPath(args);
    assert.equal(statSync(page).mode & 0o077, 0, 'only the user reads the page');
    // The link as the page's HTML writes it.
    assert.ok(
      readFileSync(page, 'utf8').includes(link.replaceAll('&', '&amp;')),
      'the page leads to the link',
    );
    rmSync(folder, { recursive: true, force: true });
    // The page's folder stays for the browser, which may read it after the command ended: the
    // test removes it (one was left in the temporary folder by every suite).
    assert.match(basename(dirname(page)), /^ucompute-web-/);
    rmSync(dirname(page), { recursive: true, force: true });
  });

  test('input before initialize is refused', async () => {
    const t = await terminal(w);
    t.socket.send(JSON.stringify({ type: 'input', data: 'ls' }));
    assert.equal((await t.closed).code, 4400);
  });
});

describe('the VNC relay and the pages', { timeout: 60_000 }, () => {
  let w: World;
  let id: string;
  before(async () => {
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const echoPort = (echo.address() as AddressInfo).port;
    w = await world({
      backend: () => ({
        connect: async () => {
          const socket = connect(echoPort, '127.0.0.1');
          await new Promise((resolve) => socket.once('connect', resolve));
          return socket;
        },
      }),
    });
    id = await runningJob(w, desktop);
  });
  after(async () => {
    await w.close();
    await new Promise((resolve) => echo.close(resolve));
  });

  const relay = (jobId: string, protocols: string[]) =>
    new WebSocket(`ws://127.0.0.1:${w.port}/api/jobs/vnc?jobId=${jobId}&rank=0`, protocols);

  const statusOf = (socket: WebSocket) =>
    new Promise<number>((resolve) => {
      socket.on('open', () => {
        socket.close();
        resolve(101);
      });
      socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.on('error', () => resolve(-1));
    });

  test('bytes go both ways with the session', async () => {
    const session = await open(w, id, 'VNC');
    const secret = new URL(session.url).hash.slice(1);
    const socket = relay(id, ['binary', `session.${secret}`]);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    assert.equal(socket.protocol, 'binary');
    socket.send(Buffer.from('RFB 003.008\n'));
    const back = await new Promise<Buffer>((resolve) => socket.once('message', (d) => resolve(d as Buffer)));
    assert.equal(back.toString(), 'RFB 003.008\n');
    socket.close();
  });

  test('refused without a session, with a shell session, or for another job', async () => {
    assert.equal(await statusOf(relay(id, ['binary'])), 401);
    const shell = await open(w, id, 'SHELL');
    assert.equal(await statusOf(relay(id, ['binary', `session.${shell.sessionIdentifier}`])), 401);
    const other = await runningJob(w, desktop);
    const session = await open(w, id, 'VNC');
    const secret = new URL(session.url).hash.slice(1);
    assert.equal(await statusOf(relay(other, ['binary', `session.${secret}`])), 401);
  });

  test('the pages and their assets, and nothing else from the packages', async () => {
    const host = `localhost:${w.port}`;
    for (const path of ['/sessions/shell', '/sessions/vnc']) {
      const answer = await call(w.port, { host, path });
      assert.equal(answer.status, 200, path);
      assert.match(String(answer.headers['content-security-policy']), /default-src 'self'/);
    }
    for (const name of [
      'xterm.js',
      'xterm.css',
      'addon-fit.js',
      'shell.js',
      'vnc.js',
      'vnc-start.js',
      'novnc/core/rfb.js',
    ]) {
      assert.equal((await call(w.port, { host, path: `/sessions/assets/${name}` })).status, 200, name);
    }
    for (const name of [
      'novnc/package.json',
      'novnc/core/../../../package.json',
      'novnc/core/%2e%2e/rfb.js',
      'pages.ts',
    ]) {
      assert.equal((await call(w.port, { host, path: `/sessions/assets/${name}` })).status, 404, name);
    }
  });
});
