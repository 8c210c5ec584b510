import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { pino } from 'pino';
import { connect } from '../src/backends/kubernetes/connection.ts';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { sessionRevocation } from '../src/interactive/sessions.ts';
import { createJobService } from '../src/jobs/service.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import { buildServer } from '../src/server/app.ts';
import { openStore, type Store } from '../src/store/store.ts';
import { eventually, type FakeCluster, fakeCluster } from './support/fake-kube/cluster.ts';
import { catalog, products } from './support/fixtures.ts';
import { call } from './support/interactive.ts';

/**
 * Web sessions on the Kubernetes backend without a browser: ucompute in process (job service,
 * sessions, proxy) on the fake API server, the job's "pod" a small web app of the test's own,
 * reached through port-forward or, in the cluster, at the pod's IP.
 */

const NAMESPACE = 'ucompute-u-alice';
const YEAR = 365 * 24 * 3600 * 1000;

/** The job's web app: answers the path it was asked for and which connection carried it. */
async function webApp(t: TestContext, port = 0, host = '127.0.0.1'): Promise<Server> {
  let connections = 0;
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.end(`app saw ${req.url} on connection ${(req.socket as { n?: number }).n}`);
  });
  server.on('connection', (socket) => Object.assign(socket, { n: ++connections }));
  server.listen(port, host);
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return server;
}

/** ucompute in process on the fake cluster: a store in `dir`, so that a second one is a restart. */
async function ucompute(t: TestContext, cluster: FakeCluster, dir: string, o: { inCluster?: boolean } = {}) {
  const config = resolvePipelineConfig(cluster.config());
  const conn = connect(config.kubernetes);
  const backend = kubernetesBackend({ config, connection: { ...conn, inCluster: o.inCluster ?? false } });
  const store: Store = openStore(join(dir, 'ucompute.db'));
  const env = { catalog, products, config };
  const service = createJobService({
    store,
    env,
    backend,
    plugins: [...PLUGINS, sessionRevocation(store)],
  });
  const app = await buildServer({ service, store, env, backend, logger: pino({ level: 'silent' }) });
  await service.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await app.close();
    await service.stop();
    await backend.close();
    store.close();
  };
  t.after(stop);
  return { port, store, service, stop };
}

function alice(store: Store): string {
  if (!store.getUser('alice')) {
    store.createUser('alice', false);
    store.grant('user:alice', 'u1-standard', 1_000_000, Date.now() - 1000, Date.now() + YEAR);
  }
  return store.createToken('alice', 'test');
}

async function post(port: number, token: string, path: string, body: unknown) {
  const answer = await call(port, {
    host: `localhost:${port}`,
    path,
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(answer.status, 200, answer.body);
  return JSON.parse(answer.body);
}

/** Starts the Jupyter example; the fake cluster runs it (pod IP `ip`) once Volcano has it. */
async function runningJupyter(
  cluster: FakeCluster,
  served: { port: number; store: Store },
  token: string,
  ip?: string,
): Promise<string> {
  const created = await post(served.port, token, '/api/jobs', {
    items: [
      {
        application: { name: 'jupyter', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: {},
      },
    ],
  });
  const id = created.responses[0].id as string;
  await eventually(() => cluster.volcano.job(id) !== undefined);
  cluster.volcano.admit(id);
  cluster.volcano.run(id);
  if (ip !== undefined) {
    const pod = structuredClone(cluster.volcano.pod(id, 0));
    pod.status.podIP = ip;
    cluster.api.apply('pods', pod);
  }
  await eventually(() => served.store.getJob(id)?.state === 'RUNNING');
  return id;
}

/** Opens a web session and trades its link for the cookie, as a browser does. */
async function signIn(port: number, token: string, id: string): Promise<string> {
  const opened = await post(port, token, '/api/jobs/interactiveSession', {
    items: [{ id, rank: 0, sessionType: 'WEB' }],
  });
  const link = new URL(opened.responses[0].session.redirectClientTo);
  const landed = await call(port, { host: link.host, path: link.pathname + link.search });
  assert.equal(landed.status, 303);
  return String(landed.headers['set-cookie']).split(';')[0] as string;
}

const appGet = (port: number, id: string, cookie: string, path: string) =>
  call(port, { host: `app-${id}-0.localhost:${port}`, path, headers: { cookie } });

const portForwards = (cluster: FakeCluster, id: string) =>
  cluster.api.calls.filter((c) => c.resource === 'pods/portforward' && c.name === `j-${id}-job-0`).length;

test('outside the cluster: the proxy reaches the app through port-forward, and keeps the stream for the next requests', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-k8s-sessions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cluster = await fakeCluster(t);
  const app = await webApp(t);
  const served = await ucompute(t, cluster, dir);
  const token = alice(served.store);
  const id = await runningJupyter(cluster, served, token);
  cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, (app.address() as AddressInfo).port);
  const cookie = await signIn(served.port, token, id);
  for (const path of ['/tree', '/api/kernels', '/static/a.js']) {
    const answer = await appGet(served.port, id, cookie, path);
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.body, `app saw ${path} on connection 1`);
  }
  assert.equal(portForwards(cluster, id), 1);
  assert.deepEqual(cluster.api.invalid, []);
});

test('in the cluster: the proxy reaches the app at the pod IP, without port-forward', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-k8s-sessions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cluster = await fakeCluster(t);
  // The pod's address is a loopback alias with Jupyter's port: what ucompute reaches in the cluster.
  const podIp = `127.${1 + (process.pid % 200)}.${Math.floor(Math.random() * 250) + 1}.${1 + Math.floor(Math.random() * 250)}`;
  await webApp(t, 8888, podIp);
  const served = await ucompute(t, cluster, dir, { inCluster: true });
  const token = alice(served.store);
  const id = await runningJupyter(cluster, served, token, podIp);
  const cookie = await signIn(served.port, token, id);
  const answer = await appGet(served.port, id, cookie, '/tree?x=1');
  assert.equal(answer.status, 200, answer.body);
  assert.equal(answer.body, 'app saw /tree?x=1 on connection 1');
  assert.equal(portForwards(cluster, id), 0);
});

test('a restart of ucompute keeps the routes of running jobs: the same cookie reaches the app', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-k8s-sessions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cluster = await fakeCluster(t);
  const app = await webApp(t);
  const first = await ucompute(t, cluster, dir);
  const token = alice(first.store);
  const id = await runningJupyter(cluster, first, token);
  cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, (app.address() as AddressInfo).port);
  const cookie = await signIn(first.port, token, id);
  assert.equal((await appGet(first.port, id, cookie, '/before')).status, 200);
  await first.stop();

  const second = await ucompute(t, cluster, dir);
  await eventually(() => second.store.getJob(id)?.state === 'RUNNING');
  const answer = await appGet(second.port, id, cookie, '/after');
  assert.equal(answer.status, 200, answer.body);
  assert.match(answer.body, /^app saw \/after on connection/);
  // Without the session it is still refused after the restart.
  assert.equal((await appGet(second.port, id, 'ucompute-session=forged', '/after')).status, 401);
  // The job ends: its sessions end with it.
  cluster.volcano.finish(id, [0]);
  await eventually(() => second.store.getJob(id)?.state === 'SUCCESS');
  assert.equal((await appGet(second.port, id, cookie, '/after')).status, 401);
  assert.deepEqual(cluster.api.invalid, []);
});
