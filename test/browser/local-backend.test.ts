import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { removeBridgeNetwork } from '../../src/backends/local/network.ts';
import { fortyTwoInTerminal, localServeConfig, serveClient, VNC_CONNECTED } from '../support/browser.ts';
import { type IsolatedChromium, launchChromium } from '../support/chromium.ts';
import { DISTINCT_COLOURS, processesWithArgument } from '../support/interactive.ts';
import { needs } from '../support/local-tools.ts';
import { ROOT } from '../support/paths.ts';
import { serving, spawnServe } from '../support/serve.ts';
import { until } from '../support/until.ts';

/**
 * The example apps as real jobs: `ucompute serve` on the local backend (its own bridge and
 * subnet), each job started through the API and opened in Chromium (each test its own time budget). Jupyter through the session
 * link, a kernel asked `1+1` over its WebSocket through the proxy; the desktop (Xvnc in the job)
 * drawn by noVNC through the relay; the terminal app's shell printing 42. Screenshots in
 * test-artifacts/browser.
 */

const tools = await needs(
  'bwrap',
  'nft',
  'ip',
  'chromium',
  'jupyter-notebook',
  'Xvnc',
  'dbus-launch',
  'xfce4-panel',
);
const ARTIFACTS = join(ROOT, 'test-artifacts', 'browser');

/** Run in the page: starts a kernel and answers what `1+1` gives, over the kernel's WebSocket. */
const ONE_PLUS_ONE = `(async () => {
  const xsrf = document.cookie.split('; ').find((c) => c.startsWith('_xsrf='))?.slice(6) ?? '';
  const created = await fetch('/api/kernels', {
    method: 'POST',
    headers: { 'X-XSRFToken': xsrf, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'python3' }),
  });
  if (!created.ok) return 'starting a kernel: ' + created.status;
  const kernel = await created.json();
  const socket = new WebSocket('ws://' + location.host + '/api/kernels/' + kernel.id + '/channels');
  return await new Promise((resolve) => {
    socket.onopen = () => socket.send(JSON.stringify({
      header: { msg_id: 'one-plus-one', username: '', session: 'test', msg_type: 'execute_request', version: '5.3', date: new Date().toISOString() },
      parent_header: {}, metadata: {}, channel: 'shell', buffers: [],
      content: { code: '1+1', silent: false, store_history: false, user_expressions: {}, allow_stdin: false, stop_on_error: true },
    }));
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.msg_type === 'execute_result') resolve(message.content.data['text/plain']);
    };
    socket.onerror = () => resolve('the kernel WebSocket failed');
  });
})()`;

describe('the example apps on the local backend, in a browser', tools, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'ucompute-jupyter-'));
  // Passable by others: the sandbox reaches the data folder as containers' unprivileged host users.
  chmodSync(tmp, 0o711);
  const { config, bridge } = localServeConfig(tmp);
  let server: ChildProcess | undefined;
  let url: string;
  let client: ReturnType<typeof serveClient>;
  let browser: Browser | undefined;
  let isolated: IsolatedChromium | undefined;
  const jobs: string[] = [];

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    server = spawnServe(['--data-dir', join(tmp, 'data'), '--config', config, '--backend', 'local']);
    url = await serving(server);
    client = serveClient(url, readFileSync(join(tmp, 'data', 'admin.token'), 'utf8').trim());
    isolated = await launchChromium([Number(new URL(url).port)]);
    browser = isolated.browser;
  });

  after(async () => {
    await isolated?.close();
    await stopAll().catch(() => {});
    server?.kill('SIGTERM');
    await new Promise((resolve) =>
      server?.exitCode === null ? server.once('exit', resolve) : resolve(null),
    );
    await removeBridgeNetwork(bridge).catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  });

  async function stopAll(): Promise<void> {
    const ids = jobs.splice(0);
    if (ids.length > 0) await client.api('/api/jobs/terminate', { items: ids.map((id) => ({ id })) });
  }

  async function running(app: string): Promise<string> {
    // The machine has room for one such job at a time: the one before is stopped first.
    await stopAll();
    const id = await client.submit(app);
    jobs.push(id);
    await client.untilRunning(app, id);
    return id;
  }

  test('Jupyter: a kernel computes 1+1 through the proxy', { timeout: 180_000 }, async () => {
    const id = await running('jupyter');
    const link = (await client.open(id, 'WEB')).redirectClientTo;
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(link);
    assert.doesNotMatch(page.url(), /ticket/);
    // Until Jupyter listens, the proxy answers 502 with a page saying so.
    await until(
      async () => {
        const answer = await page.goto(`http://app-${id}-0.localhost:${new URL(url).port}/tree`);
        return answer?.status() === 200;
      },
      { describe: 'Jupyter answering through the proxy', timeout: 60_000, every: 200 },
    );
    assert.equal(await page.evaluate<string>(ONE_PLUS_ONE), '2');
    await page.screenshot({ path: join(ARTIFACTS, 'jupyter-local.png') });
    // Neither the link's ticket nor the cookie's secret is in any process's arguments.
    const cookie = (await page.context().cookies()).find((c) => c.name === 'ucompute-session');
    assert.ok(cookie?.httpOnly);
    for (const secret of [new URL(link).searchParams.get('ticket') ?? '', cookie.value]) {
      assert.deepEqual(processesWithArgument(secret), []);
    }
    await page.close();
  });

  test('the desktop: noVNC finishes the handshake with Xvnc in the job and draws it', {
    timeout: 180_000,
  }, async () => {
    const id = await running('desktop');
    const session = await client.open(id, 'VNC');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    // Until Xvnc listens the relay closes at once; the page tries again and says when it is connected.
    await page.goto(session.url);
    await page.locator(VNC_CONNECTED).waitFor({ timeout: 120_000 });
    await until(async () => (await page.evaluate<number>(DISTINCT_COLOURS)) >= 2, {
      describe: 'a drawn desktop',
      timeout: 30_000,
      every: 100,
    });
    await page.screenshot({ path: join(ARTIFACTS, 'desktop-local.png') });
    await page.close();
  });

  test('the terminal: echo $((6*7)) prints 42 in the job', { timeout: 120_000 }, async () => {
    const id = await running('terminal');
    const session = await client.open(id, 'SHELL');
    const page = await browser!.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${url}/sessions/shell#${session.sessionIdentifier}`);
    await fortyTwoInTerminal(page);
    await page.screenshot({ path: join(ARTIFACTS, 'terminal-local.png') });
    await page.close();
  });
});
