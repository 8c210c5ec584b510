import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import {
  fortyTwoInTerminal,
  freePort,
  onePlusOneInNotebook,
  serveClient,
  startDesktop,
  startJupyter,
  until,
} from '../support/browser.ts';
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
/** The namespace of the admin user `local`'s jobs (one namespace per owner). */
const NAMESPACE = 'ucompute-u-local';

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
  let client: ReturnType<typeof serveClient>;
  let browser: Browser | undefined;
  /** Where the fake cluster's pods' ports lead, per application. */
  const appPorts = new Map<string, number>();

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'ucompute-k8s-browser-'));
    const jupyterPort = await freePort();
    const vncPort = await freePort();
    appPorts.set('jupyter', jupyterPort);
    appPorts.set('desktop', vncPort);
    children.push(startJupyter(work, jupyterPort));
    // A display number of its own: the local browser tests use 40 to 89.
    children.push(...(await startDesktop(work, `:${100 + (process.pid % 100)}`, vncPort)));

    cluster = await fakeCluster({ after: (f) => void cleanups.push(f) }, { realShellIn: work });
    const config = join(work, 'config.yml');
    writeFileSync(config, `kubernetes:\n  kubeconfig: ${cluster.kubeconfig}\n`);
    server = spawnServe(['--backend', 'kubernetes', '--config', config, '--data-dir', join(work, 'data')]);
    url = await serving(server);
    token = readFileSync(join(work, 'data', 'admin.token'), 'utf8').trim();
    client = serveClient(url, token);
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
    const id = await client.submit(app);
    await until(`the Volcano Job of ${app}`, async () => cluster.volcano.job(id) !== undefined);
    const port = appPorts.get(app);
    if (port !== undefined) cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, port);
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await client.untilRunning(app, id);
    return id;
  }

  const callsTo = (resource: string, id: string) =>
    cluster.api.calls.filter((c) => c.resource === resource && c.name === `j-${id}-job-0`).length;

  test('Jupyter through port-forward: a cell computes 1+1', async () => {
    const id = await running('jupyter');
    const session = await client.open(id, 'WEB');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(session.redirectClientTo);
    assert.doesNotMatch(page.url(), /ticket/);
    const origin = `http://app-${id}-0.localhost:${new URL(url).port}`;
    assert.equal(new URL(page.url()).origin, origin);
    await page.goto(`${origin}/notebooks/test.ipynb`);
    assert.equal(await onePlusOneInNotebook(page, 90_000), '2');
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
    const session = await client.open(id, 'VNC');
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
    const session = await client.open(id, 'SHELL');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${url}/sessions/shell#${session.sessionIdentifier}`);
    await fortyTwoInTerminal(page);
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
