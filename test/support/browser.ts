/**
 * Set-up shared by the browser tests: waiting on a condition, the example apps' programs started
 * on loopback as the test's own processes (Jupyter, a VNC desktop), and the calls a test makes to a
 * `ucompute serve` child to run an example app and open its session.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { testNetwork } from './local-backend.ts';

export const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';

/** Asks `condition` up to `tries` times, `everyMs` apart (a thrown error counts as not yet); fails naming `what`. */
export async function until(
  what: string,
  condition: () => Promise<boolean>,
  tries = 300,
  everyMs = 200,
): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await condition().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  assert.fail(`${what} did not happen in time`);
}

/** A loopback port nothing listens on right now. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/** Whether something accepts connections on the loopback port. */
export const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

/**
 * Jupyter Notebook on a loopback port serving `work`, with an empty notebook test.ipynb in it, run
 * with the example app's own arguments (examples/apps/jupyter.yml).
 */
export function startJupyter(work: string, port: number): ChildProcess {
  writeFileSync(
    join(work, 'test.ipynb'),
    JSON.stringify({
      cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: [] }],
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
      nbformat: 4,
      nbformat_minor: 5,
    }),
  );
  return spawn(
    'jupyter-notebook',
    [
      '--no-browser',
      '--ip=127.0.0.1',
      `--port=${port}`,
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
      },
      stdio: 'ignore',
    },
  );
}

/**
 * The example desktop: Xtigervnc on X display `display` and loopback port `port`, and once it
 * listens a white xterm on it (noVNC then draws two colours at least). Gives both processes.
 */
export async function startDesktop(work: string, display: string, port: number): Promise<ChildProcess[]> {
  const xvnc = spawn(
    'Xtigervnc',
    [display, '-SecurityTypes', 'None', '-localhost', '-rfbport', String(port), '-geometry', '800x600'],
    { cwd: work, env: { PATH: SYSTEM_PATH, HOME: work }, stdio: 'ignore' },
  );
  try {
    await until('Xtigervnc listening', () => listening(port), 600);
  } catch (error) {
    xvnc.kill('SIGTERM');
    throw error;
  }
  const xterm = spawn('xterm', ['-geometry', '80x24+10+10', '-bg', 'white', '-fg', 'black'], {
    cwd: work,
    env: { PATH: SYSTEM_PATH, HOME: work, DISPLAY: display },
    stdio: 'ignore',
  });
  return [xvnc, xterm];
}

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
 * In the xterm.js page on `page`: waits for the shell's `$` prompt, runs `echo $((6*7))` and waits
 * for a row that is `42` (each wait `tries` × `everyMs`, as `until`).
 */
export async function fortyTwoInTerminal(page: Page, tries = 300, everyMs = 200): Promise<void> {
  await page.waitForSelector('.xterm-rows');
  await until(
    'a prompt',
    async () => ((await page.locator('.xterm-rows').textContent()) ?? '').includes('$'),
    tries,
    everyMs,
  );
  await page.keyboard.type('echo $((6*7))');
  await page.keyboard.press('Enter');
  await until(
    'the answer',
    async () =>
      (await page.locator('.xterm-rows > div').allTextContents()).some((row) => row.trim() === '42'),
    tries,
    everyMs,
  );
}

/**
 * Writes `dir`/config.yml for `ucompute serve --backend local` on the host's userland with a bridge
 * and subnet of the test's own; gives its path and the bridge (remove it with removeBridgeNetwork).
 */
export function localServeConfig(dir: string): { config: string; bridge: string } {
  const { bridge, subnet } = testNetwork();
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    `local:\n  hostUserland: true\n  network: { bridge: ${bridge}, subnet: ${subnet} }\n`,
  );
  return { config, bridge };
}

export type Session = { redirectClientTo: string; url: string; sessionIdentifier: string };

/** The HTTP API of a `ucompute serve` child at `url`, called with `token`. */
export function serveClient(url: string, token: string) {
  /** GET without a body, POST with one; the answer must be 200. */
  const api = async <T>(path: string, body?: unknown): Promise<T> => {
    const answer = await fetch(`${url}${path}`, {
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
    until(`${app} running`, async () => {
      const answer = await fetch(`${url}/api/jobs/retrieve?id=${id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const job = (await answer.json()) as { status: { state: string }; updates: unknown[] };
      assert.notEqual(job.status.state, 'FAILURE', JSON.stringify(job.updates));
      return job.status.state === 'RUNNING';
    });
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
