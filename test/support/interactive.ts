/**
 * Interactive sessions in process: the server on a loopback port over the dry backend, whose
 * `connect` reaches a small web app of the test's own (every job, every rank: the proxy is what
 * keeps them apart), with alice, bob and their tokens, and log lines kept for inspection.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { WebSocketServer } from 'ws';
import { dryBackend } from '../../src/backends/dry/dry-backend.ts';
import { sessionRevocation } from '../../src/interactive/sessions.ts';
import type { Backend } from '../../src/jobs/backend.ts';
import { createJobService, type JobService } from '../../src/jobs/service.ts';
import { PLUGINS } from '../../src/plugins/index.ts';
import { buildServer } from '../../src/server/app.ts';
import type { Store } from '../../src/store/store.ts';
import { env } from './fixtures.ts';
import { jobInState } from './server.ts';
import { openTestStore } from './store.ts';

const YEAR = 365 * 24 * 3600 * 1000;

/** What the test app saw of one request. */
export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
}

export interface World {
  app: FastifyInstance;
  store: Store;
  service: JobService;
  port: number;
  tokens: { alice: string; bob: string };
  /** Requests that reached the job's app, in order. */
  seen: Seen[];
  /** Every log line the server wrote. */
  logLines: string[];
  close(): Promise<void>;
}

export interface WorldOptions {
  /** Revoke sessions when jobs end (the production wiring); off to test the per-use job check. */
  revocation?: boolean;
  /** Backend operations to replace, given the test app's port. */
  backend?: (connectTo: number) => Partial<Backend>;
  /** The built web interface the server serves. */
  webRoot?: string;
  /** `server.publicUrl` (default: the listen address, http://localhost:<port>). */
  publicUrl?: string;
  /** How often the server says running jobs are sampled (default: the sampler's default). */
  resourceSampleMs?: number;
}

export async function world(options: WorldOptions = {}): Promise<World> {
  const seen: Seen[] = [];
  const upstream = testApp(seen);
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const appPort = (upstream.address() as AddressInfo).port;

  const store = await openTestStore();
  const now = Date.now();
  await store.users.createUser('alice', false);
  await store.users.createUser('bob', false);
  await store.accounting.grant('user:alice', 'u1-standard', 1_000_000, now - 1000, now + YEAR);
  await store.accounting.grant('user:bob', 'u1-standard', 1_000_000, now - 1000, now + YEAR);
  const tokens = {
    alice: await store.users.createToken('alice', 'test'),
    bob: await store.users.createToken('bob', 'test'),
  };

  const dry = dryBackend({ runForMs: null });
  const backend: Backend = {
    ...dry,
    connect: async () => {
      const socket = connect(appPort, '127.0.0.1');
      await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return socket;
    },
    ...options.backend?.(appPort),
  };
  const plugins = options.revocation === false ? PLUGINS : [...PLUGINS, sessionRevocation(store)];
  const service = createJobService({ store, env: env(), backend, plugins });
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  const app = await buildServer({
    service,
    store,
    env: env(),
    backend,
    logger: pino(sink),
    ...(options.webRoot !== undefined ? { webRoot: options.webRoot } : {}),
    ...(options.publicUrl !== undefined ? { publicUrl: options.publicUrl } : {}),
    ...(options.resourceSampleMs !== undefined ? { resourceSampleMs: options.resourceSampleMs } : {}),
  });
  await service.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return {
    app,
    store,
    service,
    port,
    tokens,
    seen,
    logLines,
    async close() {
      await app.close();
      await service.stop();
      await dry.close();
      await store.close();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    },
  };
}

/**
 * The job's web app: answers what it saw as JSON, counts uploaded bytes, streams server-sent
 * events on /events, and echoes WebSocket messages.
 */
function testApp(seen: Seen[]): Server {
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes };
      seen.push(entry);
      if (req.url === '/events') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: first\n\n');
        setTimeout(() => res.end('data: last\n\n'), 300);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'app=1; Path=/' });
      res.end(JSON.stringify(entry));
    });
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket, req) => {
    seen.push({ method: 'WEBSOCKET', url: req.url ?? '', headers: req.headers, bytes: 0 });
    socket.on('message', (data, binary) => socket.send(data, { binary }));
  });
  return server;
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One HTTP request to the server with any Host header (fetch refuses to set it). */
export function call(
  port: number,
  o: {
    host: string;
    path: string;
    method?: string;
    headers?: Record<string, string>;
    body?: Buffer | string;
  },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: o.method ?? 'GET',
        path: o.path,
        headers: { ...o.headers, host: o.host },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

/** Submits `spec` as `who` through the API and returns the job's id once it runs. */
export async function runningJob(w: World, spec: unknown, who: 'alice' | 'bob' = 'alice'): Promise<string> {
  const created = await call(w.port, {
    host: `localhost:${w.port}`,
    path: '/api/jobs',
    method: 'POST',
    headers: { authorization: `Bearer ${w.tokens[who]}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [spec] }),
  });
  assert.equal(created.status, 200, created.body);
  const id = (JSON.parse(created.body) as { responses: { id: string }[] }).responses[0]!.id;
  await jobInState(w, id, 'RUNNING');
  return id;
}

/** The processes on this machine whose arguments contain `secret` (none, where secrets are kept). */
export function processesWithArgument(secret: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`).includes(secret)) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/**
 * A page expression: how many colours (up to 3) a sample of the noVNC canvas's pixels has; 1 is a
 * blank screen (the example desktop is black with a white xterm).
 */
export const DISTINCT_COLOURS = `(() => {
  const c = document.querySelector('#screen canvas');
  if (!c || c.width < 100) return 0;
  const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const colours = new Set();
  for (let i = 0; i < data.length && colours.size < 3; i += 4 * 97) {
    colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  }
  return colours.size;
})()`;
