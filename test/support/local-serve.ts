/**
 * `ucompute serve` on the local backend for the browser files that drive the web interface on real
 * jobs (sessions, web-app), once per test process: in one process (the runner's browser lane) they
 * share it, its bridge and its data folder, as they share Chromium. What a file checks must not
 * depend on what another did there: each stops its own jobs, and its users, projects and files are
 * its own. It serves web/dist, the example apps and two of the tests' own (BURN, HOSTILE), and
 * samples jobs' use every second (sessions' resource chart waits on samples).
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeBridgeNetwork } from '../../src/backends/local/network.ts';
import { localServeConfig, serveClient } from './browser.ts';
import { ROOT } from './paths.ts';
import { perProcess } from './per-process.ts';
import { outputTail, serving, spawnServe } from './serve.ts';
import { builtWebApp } from './web-app.ts';

/** A job that burns CPU in bursts (a shell loop, then 0.2 s asleep: not a whole core of the suite's two). */
const BURN = `application: v1
name: burn
version: "1.0"
title: Burn CPU
authors: [test]
description: Burns CPU in bursts until its time runs out.
tags: [test]
tool: { name: debian, version: "12" }
applicationType: BATCH
invocation: [sh, -c, 'while :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.2; done']
`;

/** An application whose Markdown description holds a script, an event handler and a javascript: link. */
const HOSTILE = `application: v1
name: hostile
version: "1.0"
title: Hostile description
authors: [test]
description: |
  **Bold** text.

  <script>window.scripted = true</script>

  <img src="x" alt="x" onerror="window.handled = true">

  [a link](javascript:window.linked=true)
tags: [test]
tool: { name: debian, version: "12" }
applicationType: BATCH
invocation: [ "true" ]
`;

export interface LocalServe {
  /** Where it serves (http://127.0.0.1:PORT). */
  url: string;
  /** The administrator's (`local`'s) token, from the data folder. */
  token: string;
  /** The newest of what the server wrote (its warnings and errors), and how it ended if it has. */
  serverLog: () => string;
}

async function start(): Promise<LocalServe & { stop(): Promise<void> }> {
  builtWebApp();
  const tmp = mkdtempSync(join(tmpdir(), 'ucompute-local-serve-'));
  // Passable by others: the sandbox reaches the data folder as containers' unprivileged host users.
  chmodSync(tmp, 0o711);
  const { config, bridge } = localServeConfig(tmp);
  writeFileSync(config, 'resourceSampleMs: 1000\n', { flag: 'a' });
  const apps = join(tmp, 'apps');
  mkdirSync(apps);
  writeFileSync(join(apps, 'burn.yml'), BURN);
  writeFileSync(join(apps, 'hostile.yml'), HOSTILE);
  let server: ChildProcess | undefined;
  let url = '';
  let token = '';
  const stop = async () => {
    if (token !== '') {
      const { api } = serveClient(url, token);
      const running = await api<{ items: { id: string }[] }>('/api/jobs/browse?filterState=RUNNING').catch(
        () => ({ items: [] }),
      );
      if (running.items.length > 0)
        await api('/api/jobs/terminate', { items: running.items.map((j) => ({ id: j.id })) }).catch(() => {});
    }
    server?.kill('SIGTERM');
    await new Promise((resolve) =>
      server?.exitCode === null ? server.once('exit', resolve) : resolve(null),
    );
    await removeBridgeNetwork(bridge).catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    server = spawnServe([
      ...['--data-dir', join(tmp, 'data'), '--config', config, '--backend', 'local'],
      ...['--apps', join(ROOT, 'examples', 'apps'), '--apps', apps],
    ]);
    const serverLog = outputTail(server);
    url = await serving(server);
    token = readFileSync(join(tmp, 'data', 'admin.token'), 'utf8').trim();
    return { url, token, serverLog, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The process's local serve, started by the first file that asks. */
export const localServe = perProcess(start);
