import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import fastifySwagger from '@fastify/swagger';
import fastifyWebsocket from '@fastify/websocket';
import { type FastifyError, type FastifyInstance, fastify, LogController } from 'fastify';
import { interactiveSessions, type Sessions } from '../interactive/sessions.ts';
import { webProxy } from '../interactive/web-proxy.ts';
import type { Backend } from '../jobs/backend.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import { DEFAULT_SAMPLE_MS } from '../jobs/resource-sampler.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import { inWorkspace } from '../jobs/workspace.ts';
import type { StorageQuotas } from '../storage/quota.ts';
import type { Store } from '../store/store.ts';
import type { Api, TypeBoxTypeProvider } from './api.ts';
import { authenticate, chooseProtocol, cookieSession } from './auth.ts';
import { compileValidator, errorBody, errorResponse } from './errors.ts';
import { metrics } from './metrics.ts';
import { publicUrl } from './public-url.ts';
import { apiRoutes } from './routes/index.ts';
import { cachedSerializers, defaultSerializerFolder, lazySerializers } from './serializers.ts';
import { webSignIns } from './sign-in.ts';
import { isAppRequest, serveWebApp, WEB_APP_ROOT } from './web-app.ts';

export interface ServerDeps {
  service: JobService;
  store: Store;
  env: JobEnvironment;
  /** Where interactive sessions connect to (the service's own backend). */
  backend: Pick<Backend, 'connect' | 'shell'>;
  /** The storage folder the drives live in: with it, the server offers the files API. */
  storageRoot?: string;
  /** The owners' storage quotas, which the files API enforces and shows; without them, no limit. */
  quotas?: StorageQuotas;
  /** Fastify's `logger` option (pino options or true/false), or a ready pino logger. */
  logger?: boolean | object;
  /** The built web interface (default: web/dist of this checkout). */
  webRoot?: string;
  /** Where people reach this service (`server.publicUrl`); default: the address it listens on. */
  publicUrl?: string;
  /**
   * Provider mode: another system (UCloud Core) is the source of jobs, owners and credits. Its
   * routes are registered on the server; ucompute's own end-user API answers administrators'
   * reads only.
   */
  provider?: ProviderMode;
  /**
   * The folder the response serializers are kept in as code, built once per schema for every
   * process that finds them there (default: `$XDG_CACHE_HOME/ucompute/serializers`).
   */
  serializers?: string;
  /** How often the resource sampler samples running jobs (default DEFAULT_SAMPLE_MS): the pages poll as often. */
  resourceSampleMs?: number;
}

export interface ProviderMode {
  /** Registers the provider's routes (with their own authentication: they are public to the API's). */
  register(app: FastifyInstance, parts: { sessions: Sessions }): Promise<void>;
  /** Where the provider's session links trade their ticket for the app's cookie. */
  authorizeAlso: { path: string; query: string };
  /** Why a call of the end-user API is refused (403). */
  refusal: string;
}

/** Calls that only read, which administrators may still make in provider mode. */
function readsOnly(method: string, url: string): boolean {
  return method === 'GET' || method === 'HEAD' || url === '/api/jobs/search' || url.startsWith('/api/auth/');
}

const BODY_LIMIT = 8 * 1024 * 1024;

/**
 * The HTTP API (UCloud-shaped): jobs, catalogue, products, accounting and administration, with
 * Bearer-token authentication, Prometheus metrics and /openapi.json. Every request and response
 * schema comes from src/model (through ./schemas.ts), so validation, types and documentation agree.
 * This file sets the server up and decorates it with what the routes need; the routes of each area
 * are Fastify plugins in ./routes (registered in ./routes/index.ts), each handler parsing the
 * request, calling the domain and shaping the answer.
 */
export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const { service, store, env } = deps;
  const sessions = interactiveSessions({
    store,
    env,
    service,
    log: { error: (o, m) => app.log.error(o, m) },
  });
  const signIns = webSignIns(store);
  const proxy = webProxy({
    sessions,
    backend: deps.backend,
    log: { warn: (o, m) => app.log.warn(o, m) },
    ...(deps.provider ? { authorizeAlso: deps.provider.authorizeAlso } : {}),
  });
  // A job that stops running leaves no cached sessions and no connections to its app behind.
  const stopWatching = service.onStateChange((id, state) => {
    if (state === 'RUNNING') return;
    void sessions.forgetJob(id);
    proxy.forget(id);
  });
  // Requests for a job's app origin go to the web proxy, all others to the API.
  const upgrades = new EventEmitter();
  const app = fastify({
    ...loggerOption(deps.logger),
    serverFactory: (handler, options) => {
      const server = createServer((req, res) => {
        const target = proxy.targetOf(req);
        if (target) proxy.handle(req, res, target);
        else handler(req, res);
      });
      // Fastify sets its keep-alive time (72 s) only on a server it makes itself. Node's 5 s is too
      // close to clients' (undici reuses an idle connection for up to 4 s): a server slow to read a
      // request sent just before its 5 s closes the connection under it, and the client gets ECONNRESET.
      server.keepAliveTimeout = options.keepAliveTimeout as number;
      server.on('upgrade', (req, socket, head) => {
        const target = proxy.targetOf(req);
        if (target) proxy.upgrade(req, socket, head, target);
        else upgrades.emit('upgrade', req, socket, head);
      });
      return server;
    },
    bodyLimit: BODY_LIMIT,
    schemaController: {
      compilersFactory: {
        buildSerializer: lazySerializers(cachedSerializers(deps.serializers ?? defaultSerializerFolder())),
      },
    },
    // fast-json-stringify picks a union's branch (our string enums, nullable fields, parameter
    // values) with Ajv validators. Ajv's code optimizer made their compile ~1.4× as costly: 2.8
    // instead of 2.0 CPU-s for a job list's kept serializer (once per machine, see serializers.ts),
    // and the kept code serializes as fast either way (40 lists of 500 jobs: 0.32–0.44 CPU-s).
    serializerOpts: { ajv: { code: { optimize: false } } },
    // One line per request, written by the onResponse hook below, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
  }) as unknown as FastifyInstance;

  app.setValidatorCompiler(compileValidator);
  app.decorateRequest('caller', null as unknown as Caller);
  app.decorate('publicUrl', publicUrl(app.server, deps.publicUrl));

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'ucompute',
        version: '0.1.0',
        description: 'A compute service for research platforms (UCloud-shaped job API).',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transformObject: (documents) =>
      withoutStringDiscriminators(
        'openapiObject' in documents ? documents.openapiObject : documents.swaggerObject,
      ),
  });
  await app.register(fastifyWebsocket, {
    // Clients send close frames, (UCloud's protocol at /api/jobs) small calls, terminal input and VNC
    // events; browsers pass the token of /api/jobs/follow as a subprotocol.
    options: { maxPayload: 64 * 1024, handleProtocols: chooseProtocol, server: upgrades as never },
  });

  app.addHook('onClose', async () => {
    stopWatching();
    await sessions.close();
    proxy.close();
  });

  // ---- hooks and errors ------------------------------------------------------------------------

  app.addHook('onRequest', async (request, reply) => {
    if (request.is404) return;
    if (request.routeOptions.config.public === true) {
      // A public WebSocket (UCloud's at /api/jobs) may be signed in by the cookie: from our pages only.
      if (request.headers.upgrade !== undefined) {
        const signedIn = await cookieSession(signIns, request, reply);
        if (signedIn) request.caller = signedIn.session.caller;
      }
      return;
    }
    const project = request.headers.project;
    request.caller = await inWorkspace(
      store.users,
      await authenticate(store.users, signIns, request, reply),
      typeof project === 'string' ? project : undefined,
    );
    if (request.routeOptions.config.admin === true && !request.caller.admin) {
      throw new ServiceError(403, 'this call is for administrators only');
    }
    const route = request.routeOptions.url ?? '';
    if (deps.provider && !(request.caller.admin && readsOnly(request.method, route))) {
      throw new ServiceError(403, deps.provider.refusal);
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    request.log.info(
      {
        method: request.method,
        route,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request',
    );
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const { status, body } = errorResponse(error);
    if (status >= 500) request.log.error({ err: error }, 'unexpected error');
    if (status === 401) reply.header('www-authenticate', 'Bearer');
    return reply.code(status).send(body);
  });

  // Any other page path is the web interface's (its own client-side routes).
  const webRoot = deps.webRoot ?? WEB_APP_ROOT;
  app.setNotFoundHandler((request, reply) =>
    isAppRequest(request)
      ? serveWebApp(webRoot, request, reply)
      : reply.code(404).send(errorBody(404, `there is no ${request.method} ${request.url.split('?')[0]}`)),
  );

  // ---- routes ----------------------------------------------------------------------------------

  const api: Api = app.withTypeProvider<TypeBoxTypeProvider>();
  api
    .decorate('jobService', service)
    .decorate('store', store)
    .decorate('jobEnvironment', env)
    .decorate('signIns', signIns)
    .decorate('sessions', sessions)
    .decorate('sessionBackend', deps.backend)
    .decorate('resourceSampleMs', deps.resourceSampleMs ?? DEFAULT_SAMPLE_MS);
  await api.register(metrics);
  await api.register(apiRoutes, { storageRoot: deps.storageRoot, quotas: deps.quotas });
  if (deps.provider) await deps.provider.register(app, { sessions });

  return app;
}

// ---- logging -------------------------------------------------------------------------------------

/** Fastify 5 takes logger options as `logger` but a ready logger only as `loggerInstance`. */
function loggerOption(
  logger: boolean | object | undefined,
): { logger: boolean | object } | { loggerInstance: never } {
  if (logger === undefined) return { logger: false };
  const l = logger as { child?: unknown; info?: unknown };
  if (typeof l === 'object' && typeof l.child === 'function' && typeof l.info === 'function') {
    return { loggerInstance: logger as never };
  }
  return { logger };
}

// ---- API description -----------------------------------------------------------------------------

/**
 * The model's tagged unions carry `discriminator: "<field>"` for our own error messages; OpenAPI
 * reserves that keyword for an object, so the description leaves it out (each variant's `const`
 * tag still tells them apart).
 */
function withoutStringDiscriminators<T>(value: T): T {
  if (Array.isArray(value)) return value.map(withoutStringDiscriminators) as T;
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'discriminator' && typeof v === 'string') continue;
    out[key] = withoutStringDiscriminators(v);
  }
  return out as T;
}
