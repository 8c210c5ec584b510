import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import * as nodePty from 'node-pty';
import type { Browser, Page } from 'playwright-core';
import type { ShellOptions } from '../../src/jobs/backend.ts';
import { fortyTwoInTerminal, onePlusOneInNotebook, SYSTEM_PATH, VNC_CONNECTED } from '../support/browser.ts';
import { type IsolatedChromium, launchChromium } from '../support/chromium.ts';
import { type ExamplePrograms, examplePrograms } from '../support/example-programs.ts';
import { call, DISTINCT_COLOURS, processesWithArgument, type World, world } from '../support/interactive.ts';
import { needs } from '../support/local-tools.ts';
import { ROOT } from '../support/paths.ts';
import { until } from '../support/until.ts';

/**
 * The three session kinds in Debian's Chromium, driven by playwright-core: Jupyter through the web
 * proxy (a cell's `1+1` gives `2`, over the kernel's WebSocket), the noVNC page on an Xtigervnc
 * desktop (its canvas is not blank), and the xterm.js page on a shell (`echo $((6*7))` gives 42).
 * The jobs' programs run on this machine as the test's own processes (example-programs.ts: shared
 * with the other browser files of the process), each on a Unix socket of its own (no port to
 * pick), their output kept beside the screenshots; the backend's `connect`
 * and `shell` reach them, so that what is tested is ucompute's side: sessions, proxy, relay,
 * pages. Screenshots go to test-artifacts/browser. Each test has its own time budget.
 */

const tools = await needs('chromium-headless-shell', 'ip', 'jupyter-notebook', 'Xtigervnc', 'xterm');
const ARTIFACTS = join(ROOT, 'test-artifacts', 'browser');
const STANDARD_1 = { id: 'u1-standard-1', category: 'u1-standard' };

/** A bash on a pty, as the backend's shell gives one. */
function bash(options: ShellOptions) {
  const pty = nodePty.spawn('/bin/bash', ['--norc', '--noprofile'], {
    name: 'xterm-256color',
    cols: options.cols,
    rows: options.rows,
    cwd: tmpdir(),
    env: { PATH: SYSTEM_PATH, TERM: 'xterm-256color', PS1: '$ ' },
    encoding: null,
  });
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      pty.write(chunk.toString());
      done();
    },
    destroy(error, done) {
      pty.kill();
      done(error);
    },
  });
  pty.onData((data) => stream.push(data));
  const exitCode = new Promise<number>((resolve) =>
    pty.onExit((e) => {
      stream.push(null);
      resolve(e.exitCode);
    }),
  );
  return Object.assign(stream, { resize: (o: ShellOptions) => pty.resize(o.cols, o.rows), exitCode });
}

describe('sessions in a browser', tools, () => {
  let w: World;
  let browser: Browser;
  let isolated: IsolatedChromium | undefined;
  let page: Page;
  let programs: ExamplePrograms;

  before(
    async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      programs = await examplePrograms();
      w = await world({
        backend: () => ({
          connect: async (_jobId, _rank, port) => {
            const socket = connect(port === 8888 ? programs.jupyter.socket : programs.desktop.socket);
            await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
            return socket;
          },
          shell: async (_jobId, _rank, size) => bash(size),
        }),
      });
      isolated = await launchChromium([w.port]);
      browser = isolated.browser;
    },
    { timeout: 120_000 },
  );

  // A page per flow: a notebook left open asks "leave page?" when the next flow navigates away.
  beforeEach(async () => {
    page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  });
  afterEach(async () => {
    await page?.close({ runBeforeUnload: false });
  });

  after(async () => {
    await isolated?.close();
    await w?.close();
  });

  async function running(app: string): Promise<string> {
    const created = await call(w.port, {
      host: `localhost:${w.port}`,
      path: '/api/jobs',
      method: 'POST',
      headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        items: [{ application: { name: app, version: '1.0' }, product: STANDARD_1, parameters: {} }],
      }),
    });
    const id = JSON.parse(created.body).responses[0].id as string;
    await until(async () => (await w.store.jobs.get(id))?.state === 'RUNNING', {
      describe: 'the job running',
      timeout: 20_000,
      every: 100,
    });
    return id;
  }

  async function open(id: string, sessionType: string) {
    const answer = await call(w.port, {
      host: `localhost:${w.port}`,
      path: '/api/jobs/interactiveSession',
      method: 'POST',
      headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ id, rank: 0, sessionType }] }),
    });
    assert.equal(answer.status, 200, answer.body);
    return JSON.parse(answer.body).responses[0].session;
  }

  test('Jupyter: a cell computes 1+1 through the proxy', { timeout: 120_000 }, async () => {
    const id = await running('jupyter');
    const session = await open(id, 'WEB');
    await page.goto(session.redirectClientTo);
    // The secret is gone from the address bar: the browser landed on the app itself.
    assert.doesNotMatch(page.url(), /ticket/);
    assert.equal(new URL(page.url()).host, `app-${id}-0.localhost:${w.port}`);
    await page.goto(`http://app-${id}-0.localhost:${w.port}/notebooks/test.ipynb`);
    assert.equal(await onePlusOneInNotebook(page, 60_000), '2');
    await page.screenshot({ path: join(ARTIFACTS, 'jupyter.png') });
  });

  test('the desktop: noVNC finishes the RFB handshake and draws the screen', {
    timeout: 90_000,
  }, async () => {
    const id = await running('desktop');
    const session = await open(id, 'VNC');
    await page.goto(session.url);
    await page.locator(VNC_CONNECTED).waitFor({ timeout: 60_000 });
    await until(async () => (await page.evaluate<number>(DISTINCT_COLOURS)) >= 2, {
      describe: 'a drawn desktop',
      timeout: 20_000,
      every: 100,
    });
    // The page dropped the secret from the address bar once it had read it.
    assert.doesNotMatch(page.url(), /#/);
    await page.screenshot({ path: join(ARTIFACTS, 'desktop.png') });
  });

  test('the terminal: echo $((6*7)) prints 42', { timeout: 90_000 }, async () => {
    const id = await running('terminal');
    const session = await open(id, 'SHELL');
    await page.goto(`http://localhost:${w.port}/sessions/shell#${session.sessionIdentifier}`);
    await fortyTwoInTerminal(page, 20_000);
    await page.screenshot({ path: join(ARTIFACTS, 'terminal.png') });
    assert.deepEqual(processesWithArgument(session.sessionIdentifier), []);
  });
});
