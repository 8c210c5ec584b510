import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import {
  fortyTwoInTerminal,
  ONE_PLUS_ONE,
  serveClient,
  tcpRelay,
  VNC_CONNECTED,
} from '../support/browser.ts';
import { type IsolatedChromium, launchChromium } from '../support/chromium.ts';
import { examplePrograms } from '../support/example-programs.ts';
import { type FakeCluster, fakeCluster } from '../support/fake-kube/cluster.ts';
import { DISTINCT_COLOURS, processesWithArgument } from '../support/interactive.ts';
import { needs } from '../support/local-tools.ts';
import { ROOT } from '../support/paths.ts';
import { serving, spawnServe } from '../support/serve.ts';
import { until } from '../support/until.ts';

/**
 * The example apps on the Kubernetes backend, in Chromium: `ucompute serve --backend kubernetes`
 * against the fake API server (every object it is sent checked against the fixtures), driven by
 * the real @kubernetes/client-node. The fake cluster "runs" each job's rank 0 by forwarding its pod
 * port to a program the test starts: Jupyter (port 8888; a kernel computes 1+1 from its page) and
 * Xtigervnc (5900), each on a Unix socket of its own (example-programs.ts, shared with the other
 * browser files of the process) behind a loopback relay the system gave a port, are reached through
 * port-forward, the terminal through exec running a real `sh`. Screenshots and the programs'
 * output in test-artifacts/browser; each test has its own time budget.
 */

const tools = await needs('chromium-headless-shell', 'ip', 'jupyter-notebook', 'Xtigervnc', 'xterm');
const ARTIFACTS = join(ROOT, 'test-artifacts', 'browser');
/** The namespace of the admin user `local`'s jobs (one namespace per owner). */
const NAMESPACE = 'ucompute-u-local';

describe('the example apps on the Kubernetes backend (fake API server), in a browser', tools, () => {
  const cleanups: (() => unknown)[] = [];
  let work: string;
  let cluster: FakeCluster;
  let server: ChildProcess | undefined;
  let url: string;
  let token: string;
  let client: ReturnType<typeof serveClient>;
  let browser: Browser | undefined;
  let isolated: IsolatedChromium | undefined;
  /** Where the fake cluster's pods' ports lead, per application. */
  const appPorts = new Map<string, number>();

  before(
    async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      work = mkdtempSync(join(tmpdir(), 'ucompute-k8s-browser-'));
      const { jupyter, desktop } = await examplePrograms();
      for (const [app, started] of [
        ['jupyter', jupyter],
        ['desktop', desktop],
      ] as const) {
        const relay = await tcpRelay(started.socket);
        cleanups.push(relay.close);
        appPorts.set(app, relay.port);
      }

      cluster = await fakeCluster({ after: (f) => void cleanups.push(f) }, { realShellIn: work });
      const config = join(work, 'config.yml');
      writeFileSync(config, `kubernetes:\n  kubeconfig: ${cluster.kubeconfig}\n`);
      server = spawnServe(['--backend', 'kubernetes', '--config', config, '--data-dir', join(work, 'data')]);
      url = await serving(server);
      token = readFileSync(join(work, 'data', 'admin.token'), 'utf8').trim();
      client = serveClient(url, token);
      isolated = await launchChromium([Number(new URL(url).port)]);
      browser = isolated.browser;
    },
    { timeout: 180_000 },
  );

  after(async () => {
    await isolated?.close();
    server?.kill('SIGTERM');
    await new Promise((resolve) =>
      server?.exitCode === null ? server.once('exit', resolve) : resolve(null),
    );
    for (const cleanup of cleanups.reverse()) await cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  /** Starts the app as a job; the fake cluster admits it and "runs" rank 0 on the test's program. */
  async function running(app: string): Promise<string> {
    const id = await client.submit(app);
    await until(async () => cluster.volcano.job(id) !== undefined, {
      describe: `the Volcano Job of ${app}`,
      timeout: 60_000,
      every: 200,
    });
    const port = appPorts.get(app);
    if (port !== undefined) cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, port);
    cluster.volcano.admit(id);
    cluster.volcano.run(id);
    await client.untilRunning(app, id);
    return id;
  }

  const callsTo = (resource: string, id: string) =>
    cluster.api.calls.filter((c) => c.resource === resource && c.name === `j-${id}-job-0`).length;

  test('Jupyter through port-forward: a kernel computes 1+1', { timeout: 180_000 }, async () => {
    const id = await running('jupyter');
    const session = await client.open(id, 'WEB');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(session.redirectClientTo);
    assert.doesNotMatch(page.url(), /ticket/);
    const origin = `http://app-${id}-0.localhost:${new URL(url).port}`;
    assert.equal(new URL(page.url()).origin, origin);
    // Over the kernel's WebSocket from Jupyter's page (the notebook's own page is interactive's).
    assert.equal(await page.evaluate<string>(ONE_PLUS_ONE), '2');
    await page.screenshot({ path: join(ARTIFACTS, 'jupyter-kubernetes.png') });
    // Every byte went through the API server's port-forward of the job's pod.
    assert.ok(callsTo('pods/portforward', id) > 0);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'ucompute-session');
    assert.ok(cookie?.httpOnly);
    assert.deepEqual(processesWithArgument(cookie.value), []);
    await page.close();
  });

  test('the desktop through port-forward: the RFB handshake, then a drawn screen', {
    timeout: 120_000,
  }, async () => {
    const id = await running('desktop');
    const session = await client.open(id, 'VNC');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(session.url);
    // The page says when noVNC finished the handshake (it tries again while the relay is not up).
    await page.locator(VNC_CONNECTED).waitFor({ timeout: 90_000 });
    await until(async () => (await page.evaluate<number>(DISTINCT_COLOURS)) >= 2, {
      describe: 'a drawn desktop',
      timeout: 20_000,
      every: 100,
    });
    await page.screenshot({ path: join(ARTIFACTS, 'desktop-kubernetes.png') });
    assert.ok(callsTo('pods/portforward', id) > 0);
    await page.close();
  });

  test('the terminal through exec: echo $((6*7)) prints 42', { timeout: 120_000 }, async () => {
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
