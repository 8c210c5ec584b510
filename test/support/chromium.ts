/**
 * Chromium for the browser tests, in a network namespace of its own. Chromium drops every request
 * in flight (ERR_NETWORK_CHANGED) when it sees the machine's interfaces or addresses change, and the
 * local backend adds and removes pods' veths and namespaces all the time (this file's tests' and
 * every other test's running beside them). In its own namespace Chromium sees only its loopback;
 * the servers under test are reached there on their own port numbers, relayed to the host's
 * loopback through Unix sockets (netns-relay.ts inside, one listener per port here).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { run } from '../../src/backends/local/exec.ts';
import { splice, stopChild } from './browser.ts';

const HERE = import.meta.dirname;

/** Chromium in its own network namespace, and how to let it go (browser, relays, namespace). */
export interface IsolatedChromium {
  browser: Browser;
  close(): Promise<void>;
}

/** A listener on `dir/PORT.sock` relaying each connection to 127.0.0.1:PORT on the host. */
async function hostEnd(dir: string, port: number, connections: Set<Socket>): Promise<Server> {
  const server = createServer((client) => splice(client, connect(port, '127.0.0.1'), connections));
  server.listen(join(dir, `${port}.sock`));
  await once(server, 'listening');
  return server;
}

/**
 * Launches Chromium (headless, Playwright) in a new network namespace where `ports` — the
 * servers' ports on the host's 127.0.0.1 — answer on its own loopback: pages open
 * http://localhost:PORT, http://127.0.0.1:PORT and http://NAME.localhost:PORT as before.
 */
export async function launchChromium(ports: readonly number[]): Promise<IsolatedChromium> {
  const netns = `ucompute-chromium-${process.pid}-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-chromium-'));
  const connections = new Set<Socket>();
  const servers: Server[] = [];
  let relay: ChildProcess | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    if (relay) await stopChild(relay);
    for (const s of connections) s.destroy();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    await run('ip', ['netns', 'delete', netns]).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await run('ip', ['netns', 'add', netns]);
    await run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    // With only a loopback Chromium believes it is offline, and then reports a relayed connection
    // that fails as ERR_INTERNET_DISCONNECTED without the retry a reused keep-alive connection gets
    // (a full run once lost a POST that way). A veth pair inside the namespace, with an address and
    // no route anywhere, makes it online; nothing outside the namespace changes.
    await run('ip', ['-n', netns, 'link', 'add', 'online0', 'type', 'veth', 'peer', 'name', 'online1']);
    await run('ip', ['-n', netns, 'address', 'add', '192.0.2.1/32', 'dev', 'online0']);
    await run('ip', ['-n', netns, 'link', 'set', 'online1', 'up']);
    await run('ip', ['-n', netns, 'link', 'set', 'online0', 'up']);
    for (const port of ports) servers.push(await hostEnd(dir, port, connections));
    relay = spawn(
      'ip',
      ['netns', 'exec', netns, process.execPath, join(HERE, 'netns-relay.ts'), dir, ...ports.map(String)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [listening] = (await Promise.race([
      once(relay.stdout!, 'data'),
      once(relay, 'exit').then(([code]) => {
        throw new Error(`the relay in ${netns} exited (${code}) before listening`);
      }),
    ])) as [Buffer];
    if (!String(listening).startsWith('listening')) throw new Error(`the relay said: ${listening}`);
    browser = await chromium.launch({
      executablePath: join(HERE, 'chromium-in-netns.sh'),
      args: ['--no-sandbox'],
      env: { ...process.env, UCOMPUTE_CHROMIUM_NETNS: netns },
    });
    return { browser, close };
  } catch (error) {
    await close();
    throw error;
  }
}
