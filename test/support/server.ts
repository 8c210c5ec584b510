/** The HTTP API in process: the job service over the dry backend and the server, on a given store. */
import type { FastifyInstance } from 'fastify';
import { dryBackend } from '../../src/backends/dry/dry-backend.ts';
import type { Backend } from '../../src/jobs/backend.ts';
import { createJobService, type JobService } from '../../src/jobs/service.ts';
import type { Job, JobState } from '../../src/model/job.ts';
import { buildServer } from '../../src/server/app.ts';
import type { Store } from '../../src/store/store.ts';
import { env } from './fixtures.ts';
import { until } from './until.ts';

export interface TestServer {
  app: FastifyInstance;
  store: Store;
  service: JobService;
  /** Closes the server, the service, the backend and the store, in that order. */
  close(): Promise<void>;
}

/**
 * Builds the server over `store` (seeded by the caller first, e.g. an in-memory one) and takes it
 * over: `close` closes it too. Dry jobs (the default backend) run until terminated, so tests can
 * watch every state.
 */
export async function testServer(
  store: Store,
  backend: Backend = dryBackend({ runForMs: null }),
): Promise<TestServer> {
  const service = createJobService({ store, env: env(), backend });
  const app = await buildServer({ service, store, env: env(), backend });
  return {
    app,
    store,
    service,
    async close() {
      await app.close();
      await service.stop();
      await backend.close();
      await store.close();
    },
  };
}

/** The job as an administrator sees it, once the backend has moved it to `state`. */
export function jobInState(w: { service: JobService }, id: string, state: JobState): Promise<Job> {
  return until(
    async () => {
      const job = await w.service.retrieve({ username: 'root', admin: true }, id);
      return job.status.state === state && job;
    },
    { describe: `job ${id} is ${state}` },
  );
}
