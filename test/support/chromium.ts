/**
 * Chromium for the browser tests, in a network namespace of its own. Chromium drops every request
 * in flight (ERR_NETWORK_CHANGED) when it sees the machine's interfaces or addresses change, and the
 * local backend adds and removes pods' veths and namespaces all the time (this file's tests' and
 * every other test's running beside them). In its own namespace Chromium sees only its loopback;
 * the servers under test are reached there on their own port numbers, relayed to the host's
 * loopback through Unix sockets (netns-relay.ts inside, one listener per port here). One Chromium
 * per test process: several browser files in one process (`--test-isolation=none`) share its
 * launch (~1.8 CPU-s and a namespace, a relay and a browser each), each in contexts of its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { run } from '../../src/backends/local/exec.ts';
import { splice, stopChild } from './browser.ts';

const HERE = import.meta.dirname;

/** Chromium in its own network namespace, and how to let this file's part of it go. */
export interface IsolatedChromium {
  browser: Browser;
  /** Closes the contexts (and pages) opened on `browser` and the file's relays; the browser stays for the next file. */
  close(): Promise<void>;
}

/** A listener on `dir/PORT.sock` relaying each connection to 127.0.0.1:PORT on the host. */
async function hostEnd(dir: string, port: number, connections: Set<Socket>): Promise<Server> {
  const server = createServer((client) => splice(client, connect(port, '127.0.0.1'), connections));
  server.listen(join(dir, `${port}.sock`));
  await once(server, 'listening');
  return server;
}

/** The process's one Chromium, its namespace and relay; ports are relayed as files ask for them. */
interface Shared {
  browser: Browser;
  /** Makes 127.0.0.1:PORT inside the namespace reach the host's (the relay binds a port once). */
  relay(port: number): Promise<Server>;
  close(): Promise<void>;
}

async function launchShared(): Promise<Shared> {
  const netns = `ucompute-chromium-${process.pid}-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-chromium-'));
  const connections = new Set<Socket>();
  const relayed = new Set<number>();
  let relay: ChildProcess | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    if (relay) await stopChild(relay);
    for (const s of connections) s.destroy();
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
    // No IPv6 link-local addresses on the pair: the kernel adds them 1–2 s after the links are up
    // (after duplicate address detection), when Chromium is already loading the first file's page,
    // which it then drops as ERR_NETWORK_CHANGED (files-trash, first in its process, 12:10 today).
    for (const end of ['online0', 'online1'])
      await run('ip', ['-n', netns, 'link', 'set', end, 'addrgenmode', 'none']);
    await run('ip', ['-n', netns, 'address', 'add', '192.0.2.1/32', 'dev', 'online0']);
    await run('ip', ['-n', netns, 'link', 'set', 'online1', 'up']);
    await run('ip', ['-n', netns, 'link', 'set', 'online0', 'up']);
    const started = spawn(
      'ip',
      ['netns', 'exec', netns, process.execPath, join(HERE, 'netns-relay.ts'), dir],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    relay = started;
    const lines = createInterface({ input: started.stdout! })[Symbol.asyncIterator]();
    const said = async (what: string) => {
      const line = await Promise.race([
        lines.next(),
        once(started, 'exit').then(([code]) => {
          throw new Error(`the relay in ${netns} exited (${code}) before ${what}`);
        }),
      ]);
      return line.done ? '' : line.value;
    };
    if ((await said('listening')) !== 'listening') throw new Error(`the relay in ${netns} did not start`);
    // One port at a time: the relay answers each in turn.
    let queue = Promise.resolve();
    const relayPort = (port: number): Promise<Server> => {
      const done = queue.then(async () => {
        if (!relayed.has(port)) {
          started.stdin!.write(`${port}\n`);
          const answer = await said(`port ${port}`);
          if (answer !== `listening ${port}`) throw new Error(`the relay in ${netns} said: ${answer}`);
          relayed.add(port);
        }
        return hostEnd(dir, port, connections);
      });
      queue = done.then(
        () => undefined,
        () => undefined,
      );
      return done;
    };
    browser = await chromium.launch({
      executablePath: join(HERE, 'chromium-in-netns.sh'),
      args: ['--no-sandbox'],
      env: { ...process.env, UCOMPUTE_CHROMIUM_NETNS: netns },
    });
    return { browser, relay: relayPort, close };
  } catch (error) {
    await close();
    throw error;
  }
}

let shared: Promise<Shared> | undefined;

// The process's Chromium goes when its last test has run: with several browser files in one
// process (`--test-isolation=none`), after the last file's; a file's own close leaves it running.
after(async () => {
  const closing = shared;
  shared = undefined;
  await (await closing?.catch(() => undefined))?.close();
});

/**
 * Chromium (headless, Playwright) in a network namespace of its own, where `ports` — the servers'
 * ports on the host's 127.0.0.1 — answer on its own loopback: pages open http://localhost:PORT,
 * http://127.0.0.1:PORT and http://NAME.localhost:PORT as before. One Chromium per process, launched
 * by the first file that asks (again if it was lost); each file opens its own contexts on it.
 */
export async function launchChromium(ports: readonly number[]): Promise<IsolatedChromium> {
  const current = await shared?.catch(() => undefined);
  if (current === undefined || !current.browser.isConnected()) {
    await current?.close().catch(() => {});
    shared = launchShared();
  }
  const { browser, relay } = await shared!;
  const ends: Server[] = [];
  const close = async () => {
    await Promise.all(browser.contexts().map((c) => c.close().catch(() => {})));
    await Promise.all(ends.map((s) => new Promise((resolve) => s.close(resolve))));
  };
  try {
    for (const port of ports) ends.push(await relay(port));
  } catch (error) {
    await close();
    throw error;
  }
  return { browser, close };
}
