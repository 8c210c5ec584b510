import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { type FakeCluster, fakeCluster } from '../support/fake-kube/cluster.ts';
import { ROOT } from '../support/fixtures.ts';
import { DISTINCT_COLOURS, processesWithArgument } from '../support/interactive.ts';
import { needs } from '../support/local-tools.ts';
import { serving, spawnServe } from '../support/serve.ts';

/**
 * The example apps on the Kubernetes backend, in Chromium: `ucompute serve --backend kubernetes`
 * against the fake API server (every object it is sent checked against the fixtures), driven by
 * the real @kubernetes/client-node. The fake cluster "runs" each job's rank 0 by forwarding its pod
 * port to a program the test starts on loopback: Jupyter (port 8888) and Xtigervnc (5900) are
 * reached through port-forward, the terminal through exec running a real `sh`. Screenshots in
 * test/browser/artifacts.
 */

const tools = await needs('chromium', 'jupyter-notebook', 'Xtigervnc', 'xterm');
const ARTIFACTS = join(ROOT, 'test', 'browser', 'artifacts');
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';
/** The namespace of the admin user `local`'s jobs (one namespace per owner). */
const NAMESPACE = 'ucompute-u-local';

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

async function until(what: string, condition: () => Promise<boolean>, tries = 300): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await condition().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what} did not happen in time`);
}

describe('the example apps on the Kubernetes backend (fake API server), in a browser', {
  ...tools,
  timeout: 300_000,
}, () => {
  const cleanups: (() => unknown)[] = [];
  const children: ChildProcess[] = [];
  let work: string;
  let cluster: FakeCluster;
  let server: ChildProcess | undefined;
  let url: string;
  let token: string;
  let browser: Browser | undefined;
  /** Where the fake cluster's pods' ports lead, per application. */
  const appPorts = new Map<string, number>();

  const api = async <T>(path: string, body: unknown): Promise<T> => {
    const answer = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = await answer.json();
    assert.equal(answer.status, 200, JSON.stringify(json));
    return json as T;
  };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'ucompute-k8s-browser-'));
    const jupyterPort = await freePort();
    const vncPort = await freePort();
    appPorts.set('jupyter', jupyterPort);
    appPorts.set('desktop', vncPort);
    writeFileSync(
      join(work, 'test.ipynb'),
      JSON.stringify({
        cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: [] }],
        metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
        nbformat: 4,
        nbformat_minor: 5,
      }),
    );
    // The example app's own arguments (examples/apps/jupyter.yml), on a loopback port.
    children.push(
      spawn(
        'jupyter-notebook',
        [
          '--no-browser',
          '--ip=127.0.0.1',
          `--port=${jupyterPort}`,
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
      ),
    );
    // A display number of its own: the local browser tests use 40 to 89.
    const display = `:${100 + (process.pid % 100)}`;
    const xvnc = spawn(
      'Xtigervnc',
      [display, '-SecurityTypes', 'None', '-localhost', '-rfbport', String(vncPort), '-geometry', '800x600'],
      { cwd: work, env: { PATH: SYSTEM_PATH, HOME: work }, stdio: 'ignore' },
    );
    children.push(xvnc);
    await until('Xtigervnc listening', () => listening(vncPort), 600);
    children.push(
      spawn('xterm', ['-geometry', '80x24+10+10', '-bg', 'white', '-fg', 'black'], {
        cwd: work,
        env: { PATH: SYSTEM_PATH, HOME: work, DISPLAY: display },
        stdio: 'ignore',
      }),
    );

    cluster = await fakeCluster({ after: (f) => void cleanups.push(f) }, { realShellIn: work });
    const config = join(work, 'config.yml');
    writeFileSync(config, `kubernetes:\n  kubeconfig: ${cluster.kubeconfig}\n`);
    server = spawnServe(['--backend', 'kubernetes', '--config', config, '--data-dir', join(work, 'data')]);
    url = await serving(server);
    token = readFileSync(join(work, 'data', 'admin.token'), 'utf8').trim();
    await until('Jupyter answering', async () => (await fetch(`http://127.0.0.1:${jupyterPort}/api`)).ok);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  });

  after(async () => {
    await browser?.close();
    server?.kill('SIGTERM');
    await new Promise((resolve) =>
      server?.exitCode === null ? server.once('exit', resolve) : resolve(null),
    );
    for (const child of children) child.kill('SIGTERM');
    for (const cleanup of cleanups) await cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  /** Starts the app as a job; the fake cluster admits it and "runs" rank 0 on the test's program. */
  async function running(app: string): Promise<string> {
    const created = await api<{ responses: { id: string }[] }>('/api/jobs', {
      items: [
        {
          application: { name: app, version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    });
    const id = created.responses[0]?.id ?? '';
    await until(`the Volcano Job of ${app}`, async () => cluster.volcano.job(id) !== undefined);
    const port = appPorts.get(app);
    if (port !== undefined) cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, port);
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await until(`${app} running`, async () => {
      const answer = await fetch(`${url}/api/jobs/retrieve?id=${id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const job = (await answer.json()) as { status: { state: string }; updates: unknown[] };
      assert.notEqual(job.status.state, 'FAILURE', JSON.stringify(job.updates));
      return job.status.state === 'RUNNING';
    });
    return id;
  }

  type Session = { redirectClientTo: string; url: string; sessionIdentifier: string };
  async function open(id: string, sessionType: string): Promise<Session> {
    const opened = await api<{ responses: { session: Session }[] }>('/api/jobs/interactiveSession', {
      items: [{ id, rank: 0, sessionType }],
    });
    const session = opened.responses[0]?.session;
    assert.ok(session);
    return session;
  }

  const callsTo = (resource: string, id: string) =>
    cluster.api.calls.filter((c) => c.resource === resource && c.name === `j-${id}-job-0`).length;

  test('Jupyter through port-forward: a cell computes 1+1', async () => {
    const id = await running('jupyter');
    const session = await open(id, 'WEB');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(session.redirectClientTo);
    assert.doesNotMatch(page.url(), /ticket/);
    const origin = `http://app-${id}-0.localhost:${new URL(url).port}`;
    assert.equal(new URL(page.url()).origin, origin);
    await page.goto(`${origin}/notebooks/test.ipynb`);
    await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 90_000 });
    await page.click('.CodeMirror');
    await page.keyboard.type('1+1');
    await page.keyboard.press('Shift+Enter');
    const output = page.locator('.output_subarea.output_result pre').first();
    await output.waitFor({ timeout: 60_000 });
    assert.equal((await output.textContent())?.trim(), '2');
    await page.screenshot({ path: join(ARTIFACTS, 'jupyter-kubernetes.png') });
    // Every byte went through the API server's port-forward of the job's pod.
    assert.ok(callsTo('pods/portforward', id) > 0);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'ucompute-session');
    assert.ok(cookie?.httpOnly);
    assert.deepEqual(processesWithArgument(cookie.value), []);
    await page.close();
  });

  test('the desktop through port-forward: noVNC draws the screen', async () => {
    const id = await running('desktop');
    const session = await open(id, 'VNC');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    // A relay that failed (the machine is loaded) leaves noVNC's error: the page is opened again.
    await until(
      'a drawn desktop',
      async () => {
        await page.goto(session.url);
        await page.locator('#screen canvas').waitFor({ timeout: 20_000 });
        for (let i = 0; i < 20; i++) {
          if ((await page.evaluate<number>(DISTINCT_COLOURS)) >= 2) return true;
          await new Promise((r) => setTimeout(r, 250));
        }
        return false;
      },
      5,
    );
    await page.screenshot({ path: join(ARTIFACTS, 'desktop-kubernetes.png') });
    assert.ok(callsTo('pods/portforward', id) > 0);
    await page.close();
  });

  test('the terminal through exec: echo $((6*7)) prints 42', async () => {
    const id = await running('terminal');
    const session = await open(id, 'SHELL');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${url}/sessions/shell#${session.sessionIdentifier}`);
    await page.waitForSelector('.xterm-rows');
    await until('a prompt', async () =>
      ((await page.locator('.xterm-rows').textContent()) ?? '').includes('$'),
    );
    await page.keyboard.type('echo $((6*7))');
    await page.keyboard.press('Enter');
    await until('the answer', async () =>
      (await page.locator('.xterm-rows > div').allTextContents()).some((row) => row.trim() === '42'),
    );
    await page.screenshot({ path: join(ARTIFACTS, 'terminal-kubernetes.png') });
    assert.equal(callsTo('pods/exec', id), 1);
    // The page's terminal size reached the pty (xterm.js fits the window: not the default 80x24).
    assert.ok(cluster.api.resizes.some((size) => size.cols !== 80 || size.rows !== 24));
    assert.deepEqual(processesWithArgument(session.sessionIdentifier), []);
    await page.close();
  });

  test('every object ucompute sent the cluster passed the fixtures', () => {
    assert.deepEqual(cluster.api.invalid, []);
    assert.ok(cluster.api.received.some((o) => o.kind === 'Job'));
  });
});
