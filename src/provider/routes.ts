import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { CryptoKey } from 'jose';
import type { SessionLinks, Sessions } from '../interactive/sessions.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import { prepareJob } from '../jobs/prepare.ts';
import { computeSupport } from '../jobs/presentation.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import { formatIssue, ValidationError } from '../model/errors.ts';
import { isFinal } from '../model/job-states.ts';
import type { PreparedJob } from '../plugins/plugin.ts';
import type { UcloudOutboxStore } from '../store/ucloud-outbox.ts';
import type { CoreCatalog } from './core-catalog.ts';
import { readCoreJob } from './core-jobs.ts';
import { CoreTokenError, verifyCoreToken } from './core-token.ts';
import type { Delivery } from './delivery.ts';
import type { CoreJobUpdate } from './outbox.ts';

// The endpoints UCloud Core calls on its provider, under `/ucloud/<providerId>/jobs` (SDU-eScience/
// UCloud `backend/accounting-service/api/src/main/kotlin/providers/ResourceProviderApi.kt`,
// `backend/app-orchestrator-service/api/src/main/kotlin/JobsProvider.kt`; Go `provider-integration/
// shared/pkg/orchestrators/jobs.go:725-865`; IM2's handlers in `im2/pkg/controller/jobs.go`):
// bulk requests `{items}`, bulk answers `{responses}`, errors `{why, errorCode}`. Every call must
// carry Core's token for this provider (./core-token.ts); anything else is 401 and changes nothing.

export interface ProviderRouteParts {
  providerId: string;
  /** Where browsers reach ucompute, without a trailing slash. */
  publicUrl: string;
  coreKey: CryptoKey;
  service: JobService;
  env: JobEnvironment;
  catalog: CoreCatalog;
  outbox: UcloudOutboxStore;
  delivery: Pick<Delivery, 'kick'>;
  now: () => number;
}

/** Core, as the job service sees it: it may act on every job. */
export const CORE_CALLER: Caller = { username: '_UCloud', admin: true };

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The `items` of a bulk request, or a 400 naming the field. */
function itemsOf(body: unknown): unknown[] {
  const items = isObject(body) ? body.items : undefined;
  if (!Array.isArray(items) || items.length === 0 || items.length > 1000) {
    throw new ServiceError(400, 'items: must be a list of 1 to 1000 items');
  }
  return items;
}

/** The job id of an item that is a Job, or `{job: Job}`. */
function jobIdOf(item: unknown, index: number, wrapped: boolean): string {
  const job = wrapped ? (isObject(item) ? item.job : undefined) : item;
  const id = isObject(job) ? job.id : undefined;
  if (typeof id !== 'string' || id === '') {
    throw new ServiceError(400, `items[${index}]${wrapped ? '.job' : ''}.id: must be the job's id`);
  }
  return id;
}

/** Whether the Authorization header carries Core's valid token; 401 otherwise. */
export async function requireCore(request: FastifyRequest, key: CryptoKey, now: number): Promise<void> {
  const header = request.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? header.slice(7).trim() : '';
  if (token === '') throw new ServiceError(401, "this call needs Core's token for this provider");
  try {
    await verifyCoreToken(token, key, now);
  } catch (e) {
    if (e instanceof CoreTokenError) throw new ServiceError(401, e.message);
    throw e;
  }
}

export function providerRoutes(p: ProviderRouteParts) {
  const base = `/ucloud/${p.providerId}`;
  const jobs = `${base}/jobs`;
  const links: SessionLinks = {
    web: (_jobId, _rank, ticket, host) => {
      const url = new URL(p.publicUrl);
      return `${url.protocol}//${host}${url.port ? `:${url.port}` : ''}${base}/authorize-app?token=${ticket}`;
    },
    vnc: (jobId, rank, secret) => `${p.publicUrl}${base}/vnc?token=${secret}&jobId=${jobId}&rank=${rank}`,
  };

  /**
   * Stores Core's jobs and queues them, each on its own, as IM2 answers `jobs.create`: one job
   * ucompute cannot run is a 4xx naming the field (core2 sends one job per call and deletes its
   * record when the provider refuses it); in a bulk of several, the others are created and each
   * refused one is told to Core as FAILURE with the reason, its answer `null` like the others'.
   */
  async function create(items: unknown[]): Promise<{ responses: null[] }> {
    const now = p.now();
    const admitted: PreparedJob[] = [];
    const refused: CoreJobUpdate[] = [];
    for (const [i, item] of items.entries()) {
      const id = jobIdOf(item, i, false);
      try {
        const job = readCoreJob(item, now);
        await p.catalog.remember(job.application);
        admitted.push(
          prepareJob(job.specification, { id: job.id, owner: job.owner, createdAt: job.createdAt }, p.env),
        );
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        const located = e.issues.map((issue) => ({ ...issue, path: `items[${i}].${issue.path}` }));
        if (items.length === 1) throw new ValidationError(located);
        const why = located.map(formatIssue).join('; ');
        refused.push({
          id,
          update: { state: 'FAILURE', status: `ucompute cannot run this job: ${why}`, timestamp: now },
        });
      }
    }
    await admitSoon(admitted);
    if (refused.length > 0) {
      for (const update of refused) await p.outbox.add('update', update.id, update, now);
      p.delivery.kick();
    }
    return { responses: items.map(() => null) };
  }

  /** Requests waiting for the next commit of admitted jobs. */
  let waiting: { jobs: PreparedJob[]; done: (error?: unknown) => void }[] = [];

  /**
   * Stores the jobs durably before Core is answered. Requests that arrive within a millisecond
   * share one transaction, and so one sync to disk, as the standalone API's do (src/jobs/intake.ts).
   */
  function admitSoon(jobs: PreparedJob[]): Promise<void> {
    if (jobs.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      if (waiting.length === 0) setTimeout(() => void commitWaiting(), 1);
      waiting.push({ jobs, done: (error) => (error === undefined ? resolve() : reject(error)) });
    });
  }

  async function commitWaiting(): Promise<void> {
    const group = waiting;
    waiting = [];
    try {
      await p.service.admit(group.flatMap((request) => request.jobs));
      for (const request of group) request.done();
    } catch {
      // One request's failure must not fail the others: each is committed on its own.
      for (const request of group) {
        try {
          await p.service.admit(request.jobs);
          request.done();
        } catch (e) {
          request.done(e);
        }
      }
    }
  }

  /** The items' jobs that have not ended; an ended job needs nothing (core2 answers it 200). */
  async function activeIds(items: unknown[], wrapped: boolean): Promise<string[]> {
    const active: string[] = [];
    for (const [i, item] of items.entries()) {
      const id = jobIdOf(item, i, wrapped);
      const job = await p.service.retrieve(CORE_CALLER, id).catch(() => undefined);
      if (job && !isFinal(job.status.state)) active.push(id);
    }
    return active;
  }

  /** Core thinks these jobs active: the ones ucompute does not know are told FAILURE. */
  async function verify(items: unknown[]): Promise<void> {
    const ids = items.map((item, i) => jobIdOf(item, i, false));
    for (const id of ids) {
      if (
        await p.service.retrieve(CORE_CALLER, id).then(
          () => true,
          () => false,
        )
      )
        continue;
      await p.outbox.add(
        'update',
        id,
        { id, update: { state: 'FAILURE', status: 'ucompute lost track of this job', timestamp: p.now() } },
        p.now(),
      );
    }
    p.delivery.kick();
  }

  return async (app: FastifyInstance, parts: { sessions: Sessions }) => {
    await app.register(async (scope) => {
      scope.addHook('onRequest', async (request) => requireCore(request, p.coreKey, p.now()));
      const post = (path: string, handler: (body: unknown, request: FastifyRequest) => unknown) =>
        scope.post(path, { config: { public: true }, schema: { hide: true } }, async (request) =>
          handler(request.body, request),
        );
      const none = (items: unknown[]) => ({ responses: items.map(() => null) });

      post(jobs, (body) => create(itemsOf(body)));
      post(`${jobs}/terminate`, async (body) => {
        const items = itemsOf(body);
        const ids = await activeIds(items, false);
        if (ids.length > 0) await p.service.terminate(CORE_CALLER, ids);
        return none(items);
      });
      post(`${jobs}/extend`, async (body) => {
        const items = itemsOf(body);
        const extensions = items.map((item, i) => {
          const requestedTime = isObject(item) ? item.requestedTime : undefined;
          if (!isObject(requestedTime)) throw new ServiceError(400, `items[${i}].requestedTime: is required`);
          return { jobId: jobIdOf(item, i, true), requestedTime: requestedTime as never };
        });
        await p.service.extend(CORE_CALLER, extensions);
        return none(items);
      });
      post(`${jobs}/suspend`, async (body) => {
        const items = itemsOf(body);
        await p.service.suspend(
          CORE_CALLER,
          items.map((item, i) => jobIdOf(item, i, true)),
        );
        return none(items);
      });
      post(`${jobs}/unsuspend`, async (body) => {
        const items = itemsOf(body);
        await p.service.unsuspend(
          CORE_CALLER,
          items.map((item, i) => jobIdOf(item, i, true)),
        );
        return none(items);
      });
      post(`${jobs}/interactiveSession`, async (body, request) => {
        const items = itemsOf(body).map((item, i) => {
          const rank = isObject(item) ? item.rank : undefined;
          const sessionType = isObject(item) ? item.sessionType : undefined;
          if (typeof rank !== 'number') throw new ServiceError(400, `items[${i}].rank: must be a number`);
          if (sessionType !== 'WEB' && sessionType !== 'VNC' && sessionType !== 'SHELL') {
            throw new ServiceError(400, `items[${i}].sessionType: must be WEB, VNC or SHELL`);
          }
          return { id: jobIdOf(item, i, true), rank, sessionType } as const;
        });
        const reached = { protocol: 'https' as const, origin: p.publicUrl, portSuffix: '' };
        const opened = await parts.sessions.open(CORE_CALLER, items, reached, links);
        request.log.debug({ sessions: opened.length }, 'sessions opened for Core');
        // The browser goes to ucompute itself, wherever Core thinks the provider is.
        return { responses: opened.map((session) => ({ ...session, domainOverride: p.publicUrl })) };
      });
      post(`${jobs}/updateAcl`, (body) => none(itemsOf(body)));
      post(`${jobs}/verify`, async (body) => {
        await verify(itemsOf(body));
        return {};
      });
      post(`${jobs}/init`, () => ({}));
      post(`${base}/integration/init`, () => ({}));
      post(`${jobs}/requestDynamicParameters`, () => ({ parameters: [] }));
      post(`${jobs}/openTerminalInFolder`, () => {
        throw new ServiceError(400, 'ucompute opens terminals in running jobs only, not in folders');
      });
      scope.get(
        `${jobs}/retrieveProducts`,
        { config: { public: true }, schema: { hide: true } },
        async () => ({
          responses: p.env.products.map((product) => computeSupport(product, p.providerId)),
        }),
      );
    });
  };
}
