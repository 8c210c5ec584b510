/** ucompute in provider mode against the fake Core, on loopback, over a given backend. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { dryBackend } from '../../src/backends/dry/dry-backend.ts';
import type { Backend } from '../../src/jobs/backend.ts';
import { createJobService, type JobService } from '../../src/jobs/service.ts';
import { type PipelineConfig, resolvePipelineConfig } from '../../src/model/config.ts';
import { openProvider, type Provider } from '../../src/provider/provider.ts';
import { buildServer } from '../../src/server/app.ts';
import type { JobStorage } from '../../src/storage/job-storage.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { type FakeCore, fakeUcloudCore } from './fake-ucloud-core.ts';
import { EXAMPLE_CONFIG, products } from './fixtures.ts';

export const PROVIDER_ID = 'ucompute-test';

export interface ProviderWorld {
  core: FakeCore;
  app: FastifyInstance;
  /** ucompute's own address, e.g. http://127.0.0.1:1234 */
  url: string;
  store: Store;
  service: JobService;
  provider: Provider;
  dir: string;
  /** Stops ucompute (not Core); `close` stops both. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

export interface ProviderWorldOptions {
  /** The backend jobs run on (the test closes it); a dry one, closed here, when left out. */
  backend?: Backend;
  /** The owners' drives, for a backend that makes job folders (the local one). */
  storage?: JobStorage;
  /** The pipeline's configuration, over the example catalogue's. */
  pipeline?: PipelineConfig;
  core?: FakeCore;
  /** A data folder to open again (a restart). */
  dir?: string;
  keyAs?: 'bare' | 'pem';
}

export async function providerWorld(o: ProviderWorldOptions = {}): Promise<ProviderWorld> {
  const core = o.core ?? (await fakeUcloudCore(PROVIDER_ID));
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'ucompute-provider-'));
  writeFileSync(join(dir, 'refresh-token'), `${core.refreshToken}\n`);
  writeFileSync(
    join(dir, 'ucloud_key.pub'),
    o.keyAs === 'pem' ? core.publicKeyPem : `${core.publicKeyForProvider}\n`,
  );
  const store = await openStore({ sqlite: join(dir, 'ucompute.db') });
  const backend = o.backend ?? dryBackend({ runForMs: null });
  const ucloud = {
    providerId: PROVIDER_ID,
    coreUrl: core.url,
    refreshTokenFile: join(dir, 'refresh-token'),
    corePublicKeyFile: join(dir, 'ucloud_key.pub'),
    publicUrl: 'http://localhost:0',
  };
  const provider = await openProvider({ config: ucloud, store, retryMs: 5, maxRetryMs: 40 });
  const env = {
    catalog: provider.catalog,
    products,
    config: resolvePipelineConfig({ ...EXAMPLE_CONFIG, ...o.pipeline, provider: PROVIDER_ID }),
  };
  const service = createJobService({
    store,
    env,
    backend,
    requireCredits: false,
    mirror: provider.mirror,
    ...(o.storage ? { storage: o.storage } : {}),
  });
  const app = await buildServer({
    service,
    store,
    env,
    backend,
    provider: provider.mode(service, env, backend),
  });
  await service.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  provider.start(service, env).catch(() => {});
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await provider.stop();
    await app.close();
    await service.stop();
    if (!o.backend) await backend.close();
    await store.close();
  };
  return {
    core,
    app,
    url,
    store,
    service,
    provider,
    dir,
    stop,
    async close() {
      await stop();
      await core.close();
      if (!o.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Calls ucompute's provider endpoint as Core does (or with another token). */
export async function callProvider(
  w: ProviderWorld,
  path: string,
  body?: unknown,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${w.url}/ucloud/${PROVIDER_ID}/jobs${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token ?? (await w.core.token())}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : JSON.parse(text) };
}
