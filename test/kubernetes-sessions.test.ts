import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { eventually, type FakeCluster, fakeCluster } from './support/fake-kube/cluster.ts';
import {
  appGet,
  type Served,
  serveOnKubernetes,
  signIn,
  submitJupyter,
} from './support/kubernetes-sessions.ts';

/**
 * Web sessions on the Kubernetes backend without a browser: ucompute in process (job service,
 * sessions, proxy) on the fake API server, the job's "pod" a small web app of the test's own,
 * reached through port-forward or, in the cluster, at the pod's IP.
 */

const NAMESPACE = 'ucompute-u-alice';

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

/** Starts the Jupyter example; the fake cluster runs it (pod IP `ip`) once Volcano has it. */
async function runningJupyter(cluster: FakeCluster, served: Served, ip?: string): Promise<string> {
  const id = await submitJupyter(served);
  await eventually(() => cluster.volcano.job(id) !== undefined);
  cluster.volcano.admit(id);
  cluster.volcano.run(id);
  if (ip !== undefined) {
    const pod = structuredClone(cluster.volcano.pod(id, 0));
    pod.status.podIP = ip;
    cluster.api.apply('pods', pod);
  }
  await eventually(async () => (await served.store.jobs.get(id))?.state === 'RUNNING');
  return id;
}

/** A folder for the server's data, removed after the test. */
async function dataDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-k8s-sessions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const portForwards = (cluster: FakeCluster, id: string) =>
  cluster.api.calls.filter((c) => c.resource === 'pods/portforward' && c.name === `j-${id}-job-0`).length;

test('outside the cluster: the proxy reaches the app through port-forward, and keeps the stream for the next requests', async (t) => {
  const dir = await dataDir(t);
  const cluster = await fakeCluster(t);
  const app = await webApp(t);
  const served = await serveOnKubernetes(t, cluster.config(), dir);
  const id = await runningJupyter(cluster, served);
  cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, (app.address() as AddressInfo).port);
  const cookie = await signIn(served, id);
  for (const path of ['/tree', '/api/kernels', '/static/a.js']) {
    const answer = await appGet(served, id, cookie, path);
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.body, `app saw ${path} on connection 1`);
  }
  assert.equal(portForwards(cluster, id), 1);
  assert.deepEqual(cluster.api.invalid, []);
});

test('in the cluster: the proxy reaches the app at the pod IP, without port-forward', async (t) => {
  const dir = await dataDir(t);
  const cluster = await fakeCluster(t);
  // The pod's address is a loopback alias with Jupyter's port: what ucompute reaches in the cluster.
  const podIp = `127.${1 + (process.pid % 200)}.${Math.floor(Math.random() * 250) + 1}.${1 + Math.floor(Math.random() * 250)}`;
  await webApp(t, 8888, podIp);
  const served = await serveOnKubernetes(t, cluster.config(), dir, { inCluster: true });
  const id = await runningJupyter(cluster, served, podIp);
  const cookie = await signIn(served, id);
  const answer = await appGet(served, id, cookie, '/tree?x=1');
  assert.equal(answer.status, 200, answer.body);
  assert.equal(answer.body, 'app saw /tree?x=1 on connection 1');
  assert.equal(portForwards(cluster, id), 0);
});

test('a restart of ucompute keeps the routes of running jobs: the same cookie reaches the app', async (t) => {
  const dir = await dataDir(t);
  const cluster = await fakeCluster(t);
  const app = await webApp(t);
  const first = await serveOnKubernetes(t, cluster.config(), dir);
  const id = await runningJupyter(cluster, first);
  cluster.api.forwardPort(NAMESPACE, `j-${id}-job-0`, (app.address() as AddressInfo).port);
  const cookie = await signIn(first, id);
  assert.equal((await appGet(first, id, cookie, '/before')).status, 200);
  await first.stop();

  const second = await serveOnKubernetes(t, cluster.config(), dir);
  await eventually(async () => (await second.store.jobs.get(id))?.state === 'RUNNING');
  const answer = await appGet(second, id, cookie, '/after');
  assert.equal(answer.status, 200, answer.body);
  assert.match(answer.body, /^app saw \/after on connection/);
  // Without the session it is still refused after the restart.
  assert.equal((await appGet(second, id, 'ucompute-session=forged', '/after')).status, 401);
  // The job ends: its sessions end with it.
  cluster.volcano.finish(id, [0]);
  await eventually(async () => (await second.store.jobs.get(id))?.state === 'SUCCESS');
  assert.equal((await appGet(second, id, cookie, '/after')).status, 401);
  assert.deepEqual(cluster.api.invalid, []);
});
