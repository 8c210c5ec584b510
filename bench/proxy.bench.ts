/**
 * The web proxy against a direct connection and against configurable-http-proxy (JupyterHub's
 * proxy): requests per second and p50/p99 latency of a small HTTP response at concurrency 1, 16
 * and 64 (driven by wrk), and WebSocket echo round trips per second (one client, one message at a
 * time). The app is a Node server in its own process; our proxy is `buildServer` in this process
 * over the dry backend, whose `connect` reaches the app; configurable-http-proxy runs from
 * CHP_BIN (default /tmp/chp/node_modules/.bin/configurable-http-proxy, installed there with
 * `npm install --prefix /tmp/chp configurable-http-proxy@4` when missing).
 *
 * On a shared machine the load changes from one case to the next: each concurrency is measured
 * in `--rounds` rounds, the three paths one after the other in an order that turns each round,
 * and the ratios that the targets are about are taken within a round.
 *
 *   node bench/proxy.bench.ts [--seconds 5] [--rounds 3]
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { loadavg } from 'node:os';
import { parseArgs, promisify } from 'node:util';
import WebSocket from 'ws';
import { call, world } from '../test/support/interactive.ts';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } },
});
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const CHP_BIN = process.env.CHP_BIN ?? '/tmp/chp/node_modules/.bin/configurable-http-proxy';
if (!existsSync(CHP_BIN) && process.env.CHP_BIN === undefined) {
  console.error('installing configurable-http-proxy 4 into /tmp/chp');
  await promisify(execFile)('npm', [
    'install',
    '--prefix',
    '/tmp/chp',
    '--no-audit',
    '--no-fund',
    'configurable-http-proxy@4',
  ]);
}

const APP = `
const http = require('node:http');
const { WebSocketServer } = require(${JSON.stringify(new URL('../node_modules/ws/index.js', import.meta.url).pathname)});
const server = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('hello')); });
new WebSocketServer({ server }).on('connection', (s) => s.on('message', (d, binary) => s.send(d, { binary })));
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

function started(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.stdout?.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

interface Load {
  rps: number;
  p50: number;
  p99: number;
}

const millis = (text: string): number => {
  const m = /([0-9.]+)(us|ms|s)/.exec(text);
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  return m[2] === 'us' ? n / 1000 : m[2] === 's' ? n * 1000 : n;
};

/** wrk in a child process, waited on without blocking: our proxy runs in this process. */
async function wrk(url: string, connections: number, headers: Record<string, string>): Promise<Load> {
  const args = [
    '-t',
    connections > 1 ? '2' : '1',
    '-c',
    String(connections),
    '-d',
    `${SECONDS}s`,
    '--latency',
  ];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  const { stdout: out } = await promisify(execFile)('wrk', [...args, url], { encoding: 'utf8' });
  // A refused or failed request would be cheap: the numbers count only if every answer was 2xx.
  const failed = /Non-2xx or 3xx responses: ([0-9]+)/.exec(out)?.[1];
  if (failed !== undefined) throw new Error(`${url}: ${failed} answers were not 2xx or 3xx`);
  return {
    rps: Number(/Requests\/sec:\s+([0-9.]+)/.exec(out)?.[1]),
    p50: millis(/ 50%\s+(\S+)/.exec(out)?.[1] ?? ''),
    p99: millis(/ 99%\s+(\S+)/.exec(out)?.[1] ?? ''),
  };
}

async function echoes(url: string, headers: Record<string, string>): Promise<number> {
  const socket = new WebSocket(url, { headers });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  let count = 0;
  const until = Date.now() + SECONDS * 1000;
  await new Promise<void>((resolve) => {
    socket.on('message', () => {
      count++;
      if (Date.now() < until) socket.send('ping');
      else resolve();
    });
    socket.send('ping');
  });
  socket.close();
  return count / SECONDS;
}

const app = spawn(process.execPath, ['-e', APP], { stdio: ['ignore', 'pipe', 'inherit'] });
const appPort = await started(app);
const w = await world({
  backend: () => ({
    connect: async () => {
      const socket = connect(appPort, '127.0.0.1');
      await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return socket;
    },
  }),
});
const chpPort = appPort + 1;
const chp = spawn(
  CHP_BIN,
  [
    '--port',
    String(chpPort),
    '--ip',
    '127.0.0.1',
    '--default-target',
    `http://127.0.0.1:${appPort}`,
    '--api-port',
    String(appPort + 2),
    '--log-level',
    'error',
  ],
  {
    stdio: 'ignore',
    env: { ...process.env, CONFIGPROXY_AUTH_TOKEN: 'bench' },
  },
);
try {
  await listening(chpPort);
  const created = await call(w.port, {
    host: `localhost:${w.port}`,
    path: '/api/jobs',
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      items: [
        {
          application: { name: 'file-server', version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
          parameters: {},
        },
      ],
    }),
  });
  const id = JSON.parse(created.body).responses[0].id as string;
  for (let i = 0; i < 100 && (await w.store.jobs.state(id)) !== 'RUNNING'; i++)
    await new Promise((r) => setTimeout(r, 20));
  const opened = await call(w.port, {
    host: `localhost:${w.port}`,
    path: '/api/jobs/interactiveSession',
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [{ id, rank: 0, sessionType: 'WEB' }] }),
  });
  const link = new URL(JSON.parse(opened.body).responses[0].session.redirectClientTo);
  const landed = await call(w.port, { host: link.host, path: link.pathname + link.search });
  const cookie = (landed.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
  // Capitalised: wrk adds a Host header of its own unless it finds `Host`.
  const ours = { Host: link.host, Cookie: cookie };

  const targets: [string, string, Record<string, string>][] = [
    ['direct', `127.0.0.1:${appPort}`, {}],
    ['ucompute proxy', `127.0.0.1:${w.port}`, ours],
    ['configurable-http-proxy', `127.0.0.1:${chpPort}`, {}],
  ];
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  console.log(`load average at the start: ${load()}\n`);
  console.log(`HTTP, ${SECONDS} s per case (wrk):`);
  console.log('| concurrency | round | path | requests/s | p50 ms | p99 ms |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  const ratios: string[] = [];
  for (const connections of [1, 16, 64]) {
    for (let round = 1; round <= ROUNDS; round++) {
      const measured = new Map<string, Load>();
      for (let i = 0; i < targets.length; i++) {
        const [name, address, headers] = targets[(i + round - 1) % targets.length]!;
        const r = await wrk(`http://${address}/`, connections, headers);
        measured.set(name, r);
        console.log(
          `| ${connections} | ${round} | ${name} | ${Math.round(r.rps)} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} |`,
        );
      }
      const direct = measured.get('direct')!;
      const proxy = measured.get('ucompute proxy')!;
      const chp = measured.get('configurable-http-proxy')!;
      ratios.push(
        `| ${connections} | ${round} | ${(proxy.rps / chp.rps).toFixed(2)} | ${(proxy.p50 - direct.p50).toFixed(3)} | ${(chp.p50 - direct.p50).toFixed(3)} |`,
      );
    }
  }
  console.log("\nWithin each round: our requests/s over configurable-http-proxy's, and p50 added to direct:");
  console.log('| concurrency | round | ours / chp requests/s | ours added p50 ms | chp added p50 ms |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const line of ratios) console.log(line);
  console.log('\nWebSocket echo, one client, one message in flight:');
  console.log('| path | round trips/s |');
  console.log('| --- | --- |');
  for (const [name, address, headers] of targets) {
    console.log(`| ${name} | ${Math.round(await echoes(`ws://${address}/`, headers))} |`);
  }
  console.log(`\nload average at the end: ${load()}`);
} finally {
  chp.kill();
  app.kill();
  await w.close();
}
