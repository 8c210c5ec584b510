/**
 * Set-up shared by the browser tests: waiting on a condition, the example apps' programs started
 * on loopback as the test's own processes (Jupyter, a VNC desktop), and the calls a test makes to a
 * `ucompute serve` child to run an example app and open its session.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import type { Page } from 'playwright-core';
import { Agent, fetch } from 'undici';
import { testNetwork } from './test-network.ts';
import { until } from './until.ts';

export const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';

/** A program the test started, its output kept in a file of the test's artifacts. */
export interface Started {
  child: ChildProcess;
  /** Where it listens: a Unix socket in the test's folder (no port to pick, none to collide). */
  socket: string;
  stop(): Promise<void>;
}

/** SIGTERM to a child, and its end. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const ended = once(child, 'exit');
  child.kill('SIGTERM');
  await ended;
}

/** The child's stdout and stderr into `file` (created, or appended to). */
function outputTo(file: string): number {
  mkdirSync(dirname(file), { recursive: true });
  return openSync(file, 'a');
}

/** Whether what listens on `socket` answers `request` with `answer` (a protocol's readiness, not a connect). */
export function answers(socket: string, answer: RegExp, request = ''): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(socket);
    let text = '';
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(5000, () => done(false));
    s.once('connect', () => {
      if (request !== '') s.write(request);
    });
    s.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (answer.test(text)) done(true);
    });
    s.once('error', () => done(false));
    s.once('end', () => done(answer.test(text)));
  });
}

/** An HTTP status line: the app serves. */
export const HTTP_ANSWER = /^HTTP\/1\.[01] [1-5][0-9][0-9]/;
/** VNC's greeting: the RFB handshake has begun. */
export const RFB_GREETING = /^RFB \d{3}\.\d{3}\n/;

/**
 * Pipes a relay's two sockets into each other, both destroyed when either fails, each kept in
 * `connections` (for the relay's close) until it closes.
 */
export function splice(client: Socket, upstream: Socket, connections: Set<Socket>): void {
  for (const s of [client, upstream]) {
    connections.add(s);
    s.once('close', () => connections.delete(s));
    s.on('error', () => {
      client.destroy();
      upstream.destroy();
    });
  }
  client.pipe(upstream).pipe(client);
}

/**
 * A loopback TCP port (bound by the system: port 0, reported back) whose every connection is
 * relayed to the Unix socket `socket`: for what can only reach a program by TCP (a fake cluster's
 * port-forward).
 */
export async function tcpRelay(socket: string): Promise<{ port: number; close(): Promise<void> }> {
  const connections = new Set<Socket>();
  const server = createServer((client) => splice(client, connect(socket), connections));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of connections) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Jupyter Notebook on a Unix socket in `work`, serving `work` with an empty notebook test.ipynb
 * in it, run with the example app's own arguments and distutils choice (examples/apps/jupyter.yml);
 * its output in `log`. Resolves once it answers HTTP.
 */
export async function startJupyter(work: string, log: string): Promise<Started> {
  writeFileSync(
    join(work, 'test.ipynb'),
    JSON.stringify({
      cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: [] }],
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
      nbformat: 4,
      nbformat_minor: 5,
    }),
  );
  const socket = join(work, 'jupyter.sock');
  const out = outputTo(log);
  const child = spawn(
    'jupyter-notebook',
    [
      '--no-browser',
      `--sock=${socket}`,
      `--notebook-dir=${work}`,
      '--NotebookApp.token=',
      '--NotebookApp.password=',
      '--NotebookApp.allow_remote_access=True',
      '--ServerApp.token=',
      '--ServerApp.password=',
      '--ServerApp.allow_remote_access=True',
      '--allow-root',
    ],
    {
      env: {
        PATH: SYSTEM_PATH,
        HOME: work,
        JUPYTER_RUNTIME_DIR: join(work, 'jupyter', 'runtime'),
        JUPYTER_CONFIG_DIR: join(work, 'jupyter', 'config'),
        JUPYTER_DATA_DIR: join(work, 'jupyter', 'data'),
        IPYTHONDIR: join(work, 'ipython'),
        // As the example sets it (examples/apps/jupyter.yml): the standard library's distutils.
        SETUPTOOLS_USE_DISTUTILS: 'stdlib',
      },
      stdio: ['ignore', out, out],
    },
  );
  closeSync(out);
  const started = { child, socket, stop: () => stopChild(child) };
  try {
    await until(
      () => answers(socket, HTTP_ANSWER, 'GET /api HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n'),
      { describe: 'Jupyter answering HTTP on its socket', timeout: 60_000, every: 100 },
    );
  } catch (error) {
    await started.stop();
    throw error;
  }
  return started;
}

/**
 * The example desktop: Xtigervnc on a display it picks itself (-displayfd) and a Unix socket in
 * `work` (no TCP port), its output in `log`; once it greets with RFB, a white xterm on it (noVNC
 * then draws two colours at least).
 */
export async function startDesktop(work: string, log: string): Promise<Started & { display: string }> {
  const socket = join(work, 'vnc.sock');
  const out = outputTo(log);
  const xvnc = spawn(
    'Xtigervnc',
    [
      '-displayfd',
      '3',
      '-SecurityTypes',
      'None',
      '-rfbport',
      '-1',
      '-rfbunixpath',
      socket,
      '-geometry',
      '800x600',
    ],
    { cwd: work, env: { PATH: SYSTEM_PATH, HOME: work }, stdio: ['ignore', out, out, 'pipe'] },
  );
  closeSync(out);
  const children: ChildProcess[] = [xvnc];
  const stop = async () => {
    for (const c of children.reverse()) await stopChild(c);
  };
  try {
    let reported = '';
    xvnc.stdio[3]!.on('data', (chunk: Buffer) => {
      reported += chunk.toString();
    });
    await until(async () => /^\d+\n/.test(reported), {
      describe: 'Xtigervnc reporting its display',
      timeout: 60_000,
      every: 100,
    });
    await until(() => answers(socket, RFB_GREETING), {
      describe: 'Xtigervnc greeting with RFB',
      timeout: 60_000,
      every: 100,
    });
    const display = `:${reported.trim()}`;
    children.push(
      spawn('xterm', ['-geometry', '80x24+10+10', '-bg', 'white', '-fg', 'black'], {
        cwd: work,
        env: { PATH: SYSTEM_PATH, HOME: work, DISPLAY: display },
        stdio: 'ignore',
      }),
    );
    return { child: xvnc, socket, display, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The desktop page once noVNC finished the RFB handshake (the page says so). */
export const VNC_CONNECTED = 'body[data-state="connected"]';

/**
 * In the notebook open on `page`: waits up to `kernelMs` for its kernel, runs `1+1` in the first
 * cell and gives the output (`2`).
 */
export async function onePlusOneInNotebook(page: Page, kernelMs: number): Promise<string | undefined> {
  await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: kernelMs });
  await page.click('.CodeMirror');
  await page.keyboard.type('1+1');
  await page.keyboard.press('Shift+Enter');
  const output = page.locator('.output_subarea.output_result pre').first();
  await output.waitFor({ timeout: 60_000 });
  return (await output.textContent())?.trim();
}

/**
 * Run in a page of a Jupyter app's origin: answers what `1+1` gives in a kernel, over the kernel's
 * WebSocket (the proxy carries both the HTTP and the WebSocket). The kernel of a notebook open
 * there already (its session's) if there is one, else one started for it.
 */
export const ONE_PLUS_ONE = `(async () => {
  const xsrf = document.cookie.split('; ').find((c) => c.startsWith('_xsrf='))?.slice(6) ?? '';
  const sessions = await fetch('/api/sessions');
  if (!sessions.ok) return 'listing the sessions: ' + sessions.status;
  let kernel = (await sessions.json())[0]?.kernel;
  if (kernel === undefined) {
    const created = await fetch('/api/kernels', {
      method: 'POST',
      headers: { 'X-XSRFToken': xsrf, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'python3' }),
    });
    if (!created.ok) return 'starting a kernel: ' + created.status;
    kernel = await created.json();
  }
  const socket = new WebSocket('ws://' + location.host + '/api/kernels/' + kernel.id + '/channels');
  return await new Promise((resolve) => {
    socket.onopen = () => socket.send(JSON.stringify({
      header: { msg_id: 'one-plus-one', username: '', session: 'test', msg_type: 'execute_request', version: '5.3', date: new Date().toISOString() },
      parent_header: {}, metadata: {}, channel: 'shell', buffers: [],
      content: { code: '1+1', silent: false, store_history: false, user_expressions: {}, allow_stdin: false, stop_on_error: true },
    }));
    // The kernel's other clients' results (a notebook's) are not the answer.
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.msg_type === 'execute_result' && message.parent_header.msg_id === 'one-plus-one') {
        resolve(message.content.data['text/plain']);
      }
    };
    socket.onerror = () => resolve('the kernel WebSocket failed');
  });
})()`;

/**
 * In the xterm.js page on `page`: waits for the shell's `$` prompt, runs `echo $((6*7))` and waits
 * for a row that is `42` (each wait at most `timeout` ms).
 */
export async function fortyTwoInTerminal(page: Page, timeout = 60_000): Promise<void> {
  await page.waitForSelector('.xterm-rows');
  await until(async () => ((await page.locator('.xterm-rows').textContent()) ?? '').includes('$'), {
    describe: 'a prompt',
    timeout,
    every: 200,
  });
  await page.keyboard.type('echo $((6*7))');
  await page.keyboard.press('Enter');
  await until(
    async () =>
      (await page.locator('.xterm-rows > div').allTextContents()).some((row) => row.trim() === '42'),
    { describe: 'the answer', timeout, every: 200 },
  );
}

/**
 * Writes `dir`/config.yml for `ucompute serve --backend local` on the host's userland with a bridge
 * of the test's own (the subnet derived, free on the host); gives its path and the bridge (remove it
 * with removeBridgeNetwork).
 */
export function localServeConfig(dir: string): { config: string; bridge: string } {
  const { bridge } = testNetwork();
  const config = join(dir, 'config.yml');
  writeFileSync(config, `local:\n  hostUserland: true\n  network: { bridge: ${bridge} }\n`);
  return { config, bridge };
}

export type Session = { redirectClientTo: string; url: string; sessionIdentifier: string };

/**
 * Requests on a connection of their own: a kept-alive connection that the loaded server closes
 * just as it is reused fails the request (ECONNRESET), and a submit cannot be sent twice.
 */
const noKeepAlive = new Agent({ pipelining: 0 });

/** The HTTP API of a `ucompute serve` child at `url`, called with `token`. */
export function serveClient(url: string, token: string) {
  /** GET without a body, POST with one; the answer must be 200. */
  const api = async <T>(path: string, body?: unknown): Promise<T> => {
    const answer = await fetch(`${url}${path}`, {
      dispatcher: noKeepAlive,
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await answer.json();
    assert.equal(answer.status, 200, JSON.stringify(json));
    return json as T;
  };
  /** Submits the example app `app` on u1-standard-1 and gives the job's id. */
  const submit = async (app: string): Promise<string> => {
    const created = await api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [
        {
          application: { name: app, version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    });
    return created.responses[0]?.id ?? '';
  };
  /** Waits for the job to run; a job that failed fails the test with its updates. */
  const untilRunning = (app: string, id: string) =>
    until(
      async () => {
        const answer = await fetch(`${url}/api/jobs/retrieve?id=${id}`, {
          dispatcher: noKeepAlive,
          headers: { authorization: `Bearer ${token}` },
        });
        const job = (await answer.json()) as { status: { state: string }; updates: unknown[] };
        assert.notEqual(job.status.state, 'FAILURE', JSON.stringify(job.updates));
        return job.status.state === 'RUNNING';
      },
      { describe: `${app} running`, timeout: 60_000, every: 200 },
    );
  const open = async (id: string, sessionType: string): Promise<Session> => {
    const opened = await api<{ responses: { session: Session }[] }>('/api/jobs/interactiveSession', {
      items: [{ id, rank: 0, sessionType }],
    });
    const session = opened.responses[0]?.session;
    assert.ok(session);
    return session;
  };
  return { api, submit, untilRunning, open };
}
