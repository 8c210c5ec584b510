/**
 * ucompute in process on a Kubernetes cluster (the fake API server's, or a real one): job service,
 * sessions and proxy over the Kubernetes backend, with alice as a user, and what a browser does
 * to open a web app, in plain HTTP.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { connect } from '../../src/backends/kubernetes/connection.ts';
import { kubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.ts';
import { resolveKubernetesSettings } from '../../src/backends/kubernetes/settings.ts';
import type { Config } from '../../src/config/config.ts';
import { sessionRevocation } from '../../src/interactive/sessions.ts';
import { createJobService } from '../../src/jobs/service.ts';
import { resolvePipelineConfig } from '../../src/model/config.ts';
import { PLUGINS } from '../../src/plugins/index.ts';
import { buildServer } from '../../src/server/app.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { catalog, products } from './fixtures.ts';
import { call } from './interactive.ts';
import { userWithCredits } from './store.ts';

export interface Served {
  port: number;
  store: Store;
  /** A token of alice, who has credits. */
  token: string;
  stop(): Promise<void>;
}

/**
 * Serves on a loopback port with its store in `dir` (a second one on the same folder is a
 * restart); `inCluster` says whether pods are reached at their IP instead of through port-forward.
 */
export async function serveOnKubernetes(
  t: { after(cleanup: () => unknown): void },
  pipeline: Config,
  dir: string,
  o: { inCluster?: boolean } = {},
): Promise<Served> {
  const config = resolvePipelineConfig(pipeline);
  const conn = connect(resolveKubernetesSettings(pipeline.kubernetes));
  const backend = kubernetesBackend({
    config,
    settings: pipeline.kubernetes,
    connection: { ...conn, inCluster: o.inCluster ?? false },
  });
  const store = await openStore({ sqlite: join(dir, 'ucompute.db') });
  const env = { catalog, products, config };
  const service = createJobService({ store, env, backend, plugins: [...PLUGINS, sessionRevocation(store)] });
  const app = await buildServer({ service, store, env, backend, logger: pino({ level: 'silent' }) });
  await service.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const token = (await store.users.getUser('alice'))
    ? await store.users.createToken('alice', 'test')
    : await userWithCredits(store, 'alice');
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await app.close();
    await service.stop();
    await backend.close();
    await store.close();
  };
  t.after(stop);
  return {
    port: (app.server.address() as AddressInfo).port,
    store,
    token,
    stop,
  };
}

/** A JSON POST to the API as alice; asserts a 200. */
export async function post(served: Served, path: string, body: unknown) {
  const answer = await call(served.port, {
    host: `localhost:${served.port}`,
    path,
    method: 'POST',
    headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(answer.status, 200, answer.body);
  return JSON.parse(answer.body);
}

/** Submits the Jupyter example as alice; answers its id. */
export async function submitJupyter(served: Served): Promise<string> {
  const created = await post(served, '/api/jobs', {
    items: [
      {
        application: { name: 'jupyter', version: '1.0' },
        product: { id: 'u1-standard-1', category: 'u1-standard' },
        parameters: {},
      },
    ],
  });
  return created.responses[0].id as string;
}

/** Opens a web session and trades its link for the cookie, as a browser does; answers `name=value`. */
export async function signIn(served: Served, id: string): Promise<string> {
  const opened = await post(served, '/api/jobs/interactiveSession', {
    items: [{ id, rank: 0, sessionType: 'WEB' }],
  });
  const link = new URL(opened.responses[0].session.redirectClientTo);
  const landed = await call(served.port, { host: link.host, path: link.pathname + link.search });
  assert.equal(landed.status, 303);
  return String(landed.headers['set-cookie']).split(';')[0] as string;
}

/** A GET at the job's rank-0 app origin with that cookie. */
export const appGet = (served: Served, id: string, cookie: string, path: string) =>
  call(served.port, { host: `app-${id}-0.localhost:${served.port}`, path, headers: { cookie } });
