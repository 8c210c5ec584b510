import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { connect } from '../src/backends/kubernetes/connection.ts';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { resolveKubernetesSettings } from '../src/backends/kubernetes/settings.ts';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import { directoryStorage } from '../src/storage/directory.ts';
import { followAsCore, getAt, shellAsBrowser, signInWithLink, vncGreeting } from './support/core-sessions.ts';
import { fakeCluster } from './support/fake-kube/cluster.ts';
import { ucloudApplication } from './support/fake-ucloud-core.ts';
import { EXAMPLE_CONFIG } from './support/fixtures.ts';
import { openTestBackend } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { callProvider, PROVIDER_ID, type ProviderWorld, providerWorld } from './support/provider.ts';
import { until } from './support/until.ts';

/**
 * The same two jobs, sent by the fake UCloud Core, on the local backend (real sandboxed processes)
 * and on the Kubernetes backend (the fake API server, whose stand-in Volcano runs the pods while
 * small servers of the test's own play their apps): Core creates them, follows their logs, opens
 * web, terminal and VNC sessions that a browser then uses, terminates them, and receives every
 * update, in order, and their usage.
 */

// Core sends each job's application whole: these are the applications of this test's Core.
const APPS = `
tool: v1
name: python
version: "3.11"
title: Python
authors: [test]
container: python:3.11-slim-bookworm
backend: DOCKER
---
application: v1
name: hello-web
version: "1.0"
title: Hello web
authors: [test]
description: Writes a page, says so, and serves it.
tool: { name: python, version: "3.11" }
applicationType: WEB
web: { port: 8080 }
invocation:
  - sh
  - -c
  - echo hello from the job > index.html && echo serving && exec python3 -m http.server 8080 --bind 0.0.0.0
---
application: v1
name: hello-vnc
version: "1.0"
title: Hello VNC
authors: [test]
description: Greets every VNC client as an RFB server does.
tool: { name: python, version: "3.11" }
applicationType: VNC
vnc: { port: 5900 }
invocation:
  - python3
  - -c
  - |
    import socket
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 5900))
    s.listen()
    print("vnc ready", flush=True)
    while True:
        c, _ = s.accept()
        c.sendall(b"RFB 003.008\\n")
        c.close()
`;
const built = buildCatalog([{ path: 'provider-apps.yml', text: APPS }]);
assert.deepEqual(built.issues, []);
const application = (name: string) => ucloudApplication(built.catalog.find(name, '1.0')!);
const spec = (name: string) => ({
  application: { name, version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard', provider: PROVIDER_ID },
  timeAllocation: { hours: 1, minutes: 0, seconds: 0 },
});
const GREETING = 'RFB 003.008\n';

/** What a backend needs from the test for a job Core created to run. */
interface Runtime {
  /** Makes the job run, its app serving (`web` or `vnc`) and saying so in its log. */
  run(id: string, app: 'web' | 'vnc'): Promise<void>;
}

const statesAtCore = (w: ProviderWorld, id: string) =>
  w.core.updatesOf(id).flatMap((u) => (typeof u.state === 'string' ? [u.state] : []));

/** The whole scenario, the same on every backend. */
async function throughCore(w: ProviderWorld, runtime: Runtime, ids: { web: string; vnc: string }) {
  const web = w.core.job(ids.web, application('hello-web'), spec('hello-web'));
  const vnc = w.core.job(ids.vnc, application('hello-vnc'), spec('hello-vnc'));
  const created = await callProvider(w, '', { items: [web, vnc] });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  await runtime.run(ids.web, 'web');
  await runtime.run(ids.vnc, 'vnc');
  for (const id of [ids.web, ids.vnc]) {
    await until(() => statesAtCore(w, id).includes('RUNNING'), {
      timeout: 30_000,
      describe: `Core hears that ${id} runs`,
    });
  }

  // Core follows the web job's log. A failed step still closes the follow (and the terminal):
  // the server's close waits for open sockets, so one left open turns a failure into a hang.
  const follow = await followAsCore(w, web);
  try {
    await until(() => follow.stdout().includes('serving'), {
      timeout: 20_000,
      describe: 'the log line reaches Core',
    });

    // A browser opens the web app and a terminal with the sessions Core opened.
    const opened = await callProvider(w, '/interactiveSession', {
      items: [
        { job: web, rank: 0, sessionType: 'WEB', target: null },
        { job: web, rank: 0, sessionType: 'SHELL' },
        { job: vnc, rank: 0, sessionType: 'VNC' },
      ],
    });
    assert.equal(opened.status, 200, JSON.stringify(opened.body));
    const [webSession, shellSession, vncSession] = opened.body.responses as Record<string, string>[];
    const cookie = await signInWithLink(w, webSession!.redirectClientTo!);
    const appHost = new URL(webSession!.redirectClientTo!).host;
    const page = await until(
      async () => {
        const answer = await getAt(w, appHost, '/index.html', cookie);
        return answer.status === 200 && answer;
      },
      { timeout: 20_000, describe: 'the app serves its page' },
    );
    assert.equal(page.body, 'hello from the job\n');
    const terminal = await shellAsBrowser(w, shellSession!.sessionIdentifier!);
    try {
      terminal.input('echo $((6*7))\r');
      await terminal.shows('42');
    } finally {
      terminal.close();
    }
    assert.equal(await vncGreeting(w, vncSession!.url!), GREETING);

    // Core terminates both; the follow ends; every update and the usage reached Core.
    assert.equal((await callProvider(w, '/terminate', { items: [web, vnc] })).status, 200);
    for (const id of [ids.web, ids.vnc]) {
      await until(() => statesAtCore(w, id).at(-1) === 'SUCCESS', {
        timeout: 30_000,
        describe: `Core hears that ${id} ended`,
      });
      const ours = (await w.service.retrieve({ username: 'admin', admin: true }, id)).updates.slice(1);
      await until(() => w.core.updatesOf(id).length >= ours.length, {
        describe: `every update of ${id} at Core`,
      });
      assert.deepEqual(
        w.core.updatesOf(id).map((u) => [u.state, u.status, u.timestamp]),
        ours.map((u) => [u.state, u.status, u.timestamp]),
      );
      const usage = await until(
        () => w.core.state.usage.find((u) => (u.description as { scope: string }).scope === `job-${id}`),
        { describe: `the usage of ${id} at Core` },
      );
      assert.deepEqual(usage.owner, { type: 'user', username: 'alice#1234' });
      assert.deepEqual(usage.categoryIdV2, { name: 'u1-standard', provider: PROVIDER_ID });
      assert.ok(Number(usage.usage) >= 1, JSON.stringify(usage));
    }
    await until(() => follow.response(), { describe: 'the follow ends with the job' });
    assert.deepEqual(follow.response(), { type: 'response', status: 200, streamId: 'ignored', payload: {} });
  } finally {
    follow.close();
  }
}

test(
  'provider mode on the local backend: create, follow, web/terminal/VNC sessions, terminate; Core hears it all',
  await needs('bwrap', 'nft', 'ip', 'python3'),
  async (t) => {
    const local = await openTestBackend(t);
    const w = await providerWorld({
      backend: local.backend,
      storage: directoryStorage(join(local.home, 'storage')),
    });
    t.after(() => w.close());
    // The local backend runs the apps themselves.
    await throughCore(w, { run: async () => {} }, { web: '3001', vnc: '3002' });
  },
);

/** A server of the test's own on loopback, closed after the test. */
async function listening(t: TestContext, server: Server | ReturnType<typeof createHttpServer>) {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    if ('closeAllConnections' in server) server.closeAllConnections();
    server.close();
  });
  return (server.address() as AddressInfo).port;
}

test('provider mode on the Kubernetes backend (fake API): the same jobs, the same sessions, the same reports', async (t) => {
  const shellHome = await mkdtemp(join(tmpdir(), 'ucompute-provider-shell-'));
  t.after(() => rm(shellHome, { recursive: true, force: true }));
  const cluster = await fakeCluster(t, { realShellIn: shellHome });
  const pipeline = cluster.config(EXAMPLE_CONFIG);
  const backend = kubernetesBackend({
    config: resolvePipelineConfig({ ...pipeline, provider: PROVIDER_ID }),
    settings: pipeline.kubernetes,
    connection: { ...connect(resolveKubernetesSettings(pipeline.kubernetes)), inCluster: false },
  });
  t.after(() => backend.close());
  const w = await providerWorld({ backend, pipeline });
  t.after(() => w.close());
  // The apps the pods would run: a page and an RFB greeting, reached through port-forward.
  const ports = {
    web: await listening(
      t,
      createHttpServer((req, res) => {
        res.end(req.url === '/index.html' ? 'hello from the job\n' : 'not here');
      }),
    ),
    vnc: await listening(
      t,
      createTcpServer((socket) => socket.end(GREETING)),
    ),
  };
  const runtime: Runtime = {
    async run(id, app) {
      await until(() => cluster.volcano.job(id), { describe: `Volcano has ${id}` });
      cluster.volcano.admit(id);
      cluster.volcano.run(id);
      const pod = cluster.volcano.pod(id, 0)!;
      const { namespace, name } = pod.metadata as { namespace: string; name: string };
      cluster.api.forwardPort(namespace, name, ports[app]);
      cluster.api.appendLog(namespace, name, app === 'web' ? 'serving\n' : 'vnc ready\n');
    },
  };
  await throughCore(w, runtime, { web: '4001', vnc: '4002' });
});
