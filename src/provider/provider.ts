import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Sessions } from '../interactive/sessions.ts';
import type { Backend } from '../jobs/backend.ts';
import type { JobMirror } from '../jobs/mirror.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import type { JobService } from '../jobs/service.ts';
import { isFinal } from '../model/job-states.ts';
import type { UcloudProviderConfig } from '../model/ucloud-config.ts';
import { NO_CREDITS_STATUS } from '../plugins/accounting.ts';
import type { Store } from '../store/store.ts';
import { coreCatalog } from './core-catalog.ts';
import { type CoreClient, coreClient } from './core-client.ts';
import { readCorePublicKey } from './core-token.ts';
import { type DeliveryClock, outboxDelivery, systemClock } from './delivery.ts';
import { coreMirror } from './outbox.ts';
import { productV2 } from './products.ts';
import { providerRoutes } from './routes.ts';
import { providerSockets } from './sockets.ts';

// Provider mode put together: Core's key and tokens, the outbox and its delivery, the catalogue of
// Core's applications, the routes Core calls; at start, the products registered with Core and the
// jobs reconciled with what Core thinks active.

export interface ProviderOptions {
  config: UcloudProviderConfig;
  store: Store;
  log?: { warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
  clock?: DeliveryClock;
  /** First wait after a failed call to Core; it doubles up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
}

export const PROVIDER_MODE_REFUSAL =
  'ucompute runs as a UCloud provider: UCloud Core is the source of jobs, owners and credits (use UCloud); administrators may read';

/** Jobs Core thinks active in these states. */
const ACTIVE_IN_CORE = new Set(['IN_QUEUE', 'RUNNING', 'SUSPENDED', 'CANCELING']);
/** Pages of Core's jobs read at a reconciliation, at most. */
const MAX_RECONCILE_PAGES = 10_000;

export type Provider = Awaited<ReturnType<typeof openProvider>>;

export async function openProvider(o: ProviderOptions) {
  const { config, store, log } = o;
  const clock = o.clock ?? systemClock;
  const providerId = config.providerId;
  const coreKey = await readCorePublicKey(await readFile(config.corePublicKeyFile, 'utf8')).catch(
    (e: Error) => {
      throw new Error(`ucloud.corePublicKeyFile ${config.corePublicKeyFile}: ${e.message}`);
    },
  );
  const core: CoreClient = coreClient({
    coreUrl: config.coreUrl,
    refreshToken: () => readFile(config.refreshTokenFile, 'utf8'),
    now: clock.now,
  });
  const outbox = store.ucloudOutbox;
  const catalog = await coreCatalog(store.ucloudApplications);
  let service: JobService | undefined;
  const delivery = outboxDelivery({
    outbox,
    core,
    batchSize: config.batchSize ?? 500,
    lanes: config.concurrentCalls ?? 4,
    clock,
    ...(o.retryMs !== undefined ? { retryMs: o.retryMs } : {}),
    ...(o.maxRetryMs !== undefined ? { maxRetryMs: o.maxRetryMs } : {}),
    outOfCredits: (account, category) => {
      service?.stopJobsOf(account, category, NO_CREDITS_STATUS).catch((err: unknown) => {
        log?.warn({ err, account, category }, 'stopping the jobs of an owner out of credits failed');
      });
    },
    ...(log ? { log } : {}),
  });
  const written = coreMirror({
    providerId,
    legacyChargeCredits: config.legacyChargeCredits ?? false,
    now: clock.now,
  });
  // Delivered once the transaction that wrote the entry has committed.
  const kickSoon = () => setImmediate(delivery.kick);
  const mirror: JobMirror = {
    async updateWritten(tx, id, update) {
      await written.updateWritten(tx, id, update);
      kickSoon();
    },
    async chargeWritten(tx, charge, owner, total) {
      await written.chargeWritten(tx, charge, owner, total);
      kickSoon();
    },
  };
  const publicUrl = config.publicUrl.replace(/\/+$/, '');
  let stopped = false;

  /** Tries `what` until it succeeds, waiting longer each time (Core may be down at start). */
  async function untilDone(what: string, fn: () => Promise<void>): Promise<void> {
    for (let attempt = 0; !stopped; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const wait = Math.min((o.retryMs ?? 1000) * 2 ** attempt, o.maxRetryMs ?? 60_000);
        log?.warn({ err, retryInMs: wait }, `${what} failed; trying again`);
        await new Promise<void>((done) => clock.setTimeout(done, wait));
      }
    }
  }

  /** Jobs Core thinks active: those ucompute does not know failed, those it ended are told again. */
  async function reconcile(svc: JobService, startedAt: number): Promise<void> {
    let next: string | null = null;
    for (let page = 0; page < MAX_RECONCILE_PAGES; page++) {
      const query: string = `itemsPerPage=250${next !== null ? `&next=${encodeURIComponent(next)}` : ''}`;
      const answer: {
        items?: { id: string; createdAt?: number; status?: { state?: string } }[];
        next?: string | null;
      } = await core.call('GET', `/api/jobs/control/browse?${query}`);
      for (const job of answer.items ?? []) {
        if (!ACTIVE_IN_CORE.has(job.status?.state ?? '')) continue;
        // A job Core made since this start is on its way here, not lost.
        if ((job.createdAt ?? 0) >= startedAt) continue;
        const known = await store.jobs.get(job.id);
        const at = clock.now();
        if (!known) {
          const update = { state: 'FAILURE', status: 'ucompute lost track of this job', timestamp: at };
          await outbox.add('update', job.id, { id: job.id, update }, at);
        } else if (isFinal(known.state)) {
          const last = (await svc.retrieve({ username: '_UCloud', admin: true }, job.id)).updates.at(-1);
          const update = {
            state: known.state,
            status: last?.status ?? `The job is ${known.state}`,
            timestamp: at,
          };
          await outbox.add('update', job.id, { id: job.id, update }, at);
        }
      }
      next = answer.next ?? null;
      if (next === null) break;
    }
    delivery.kick();
  }

  return {
    catalog,
    mirror,
    delivery,
    core,
    outbox,

    /** What the server needs to serve provider mode. */
    mode(svc: JobService, env: JobEnvironment, backend: Pick<Backend, 'connect' | 'shell'>) {
      service = svc;
      const routes = providerRoutes({
        providerId,
        publicUrl,
        coreKey,
        service: svc,
        env,
        catalog,
        outbox,
        delivery,
        now: clock.now,
      });
      const sockets = providerSockets({ providerId, coreKey, service: svc, backend, now: clock.now });
      return {
        async register(app: FastifyInstance, parts: { sessions: Sessions }) {
          await routes(app, parts);
          await sockets(app, parts);
        },
        authorizeAlso: { path: `/ucloud/${providerId}/authorize-app`, query: 'token' },
        refusal: PROVIDER_MODE_REFUSAL,
      };
    },

    /** Registers the products, reconciles with Core and delivers the outbox, in the background. */
    start(svc: JobService, env: JobEnvironment): Promise<void> {
      service = svc;
      const startedAt = clock.now();
      delivery.kick();
      return untilDone('registering the products with Core', async () => {
        await core.call('POST', '/api/products/v2', {
          items: env.products.map((p) => productV2(p, providerId)),
        });
        log?.info({ products: env.products.length }, 'products registered with Core');
      }).then(() => untilDone('reconciling the jobs with Core', () => reconcile(svc, startedAt)));
    },

    async stop(): Promise<void> {
      stopped = true;
      await delivery.stop();
    },
  };
}
