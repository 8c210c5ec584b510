import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import fastifySwagger from '@fastify/swagger';
import fastifyWebsocket from '@fastify/websocket';
import { type FastifyError, type FastifyInstance, fastify, LogController } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { interactiveSessions } from '../interactive/sessions.ts';
import { webProxy } from '../interactive/web-proxy.ts';
import { adminOperations } from '../jobs/admin.ts';
import type { Backend } from '../jobs/backend.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import { sshKeys } from '../jobs/ssh-keys.ts';
import { JOB_STATES } from '../model/job.ts';
import type { Store } from '../store/store.ts';
import { type Api, publicRoute, type TypeBoxTypeProvider } from './api.ts';
import { authenticate, callerForToken, chooseProtocol, cookieSession, credentialHolds } from './auth.ts';
import { compileValidator, errorBody, errorResponse } from './errors.ts';
import { accountingRoutes } from './routes/accounting.ts';
import { adminRoutes } from './routes/admin.ts';
import { authRoutes } from './routes/auth.ts';
import { catalogRoutes } from './routes/catalog.ts';
import { fileRoutes } from './routes/files.ts';
import { jobRoutes } from './routes/jobs.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { sshKeyRoutes } from './routes/ssh.ts';
import { HealthResponse } from './schemas.ts';
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
  /** Fastify's `logger` option (pino options or true/false), or a ready pino logger. */
  logger?: boolean | object;
  /** The built web interface (default: web/dist of this checkout). */
  webRoot?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Who is calling; set by the authentication hook on every non-public route, and on a public
     * WebSocket signed in by the web interface's cookie (null on other public routes).
     */
    caller: Caller;
  }
  interface FastifyContextConfig {
    /** No token needed (health, metrics, the API description). */
    public?: boolean;
    /** Only administrators. */
    admin?: boolean;
  }
}

const BODY_LIMIT = 8 * 1024 * 1024;

/**
 * The HTTP API (UCloud-shaped): jobs, catalogue, products, accounting and administration, with
 * Bearer-token authentication, Prometheus metrics and /openapi.json. Every request and response
 * schema comes from src/model (through ./schemas.ts), so validation, types and documentation agree.
 * This file sets the server up; the routes of each area live in ./routes, each handler parsing the
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
  const proxy = webProxy({ sessions, backend: deps.backend, log: { warn: (o, m) => app.log.warn(o, m) } });
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
    serverFactory: (handler) => {
      const server = createServer((req, res) => {
        const target = proxy.targetOf(req);
        if (target) proxy.handle(req, res, target);
        else handler(req, res);
      });
      server.on('upgrade', (req, socket, head) => {
        const target = proxy.targetOf(req);
        if (target) proxy.upgrade(req, socket, head, target);
        else upgrades.emit('upgrade', req, socket, head);
      });
      return server;
    },
    bodyLimit: BODY_LIMIT,
    // One line per request, written by the onResponse hook below, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
  }) as unknown as FastifyInstance;

  app.setValidatorCompiler(compileValidator);
  app.decorateRequest('caller', null as unknown as Caller);

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

  // ---- metrics ---------------------------------------------------------------------------------

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'ucompute_jobs',
    help: 'Jobs in the store, by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const counts = await store.jobs.countByState();
      for (const state of JOB_STATES) this.set({ state }, counts[state] ?? 0);
    },
  });
  const submitted = new Counter({
    name: 'ucompute_jobs_submitted_total',
    help: 'Jobs accepted through the API',
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'ucompute_http_request_duration_seconds',
    help: 'HTTP request duration',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const stopCounting = service.onCreated((ids) => submitted.inc(ids.length));
  app.addHook('onClose', async () => {
    stopCounting();
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
    request.caller = await authenticate(store.users, signIns, request, reply);
    if (request.routeOptions.config.admin === true && !request.caller.admin) {
      throw new ServiceError(403, 'this call is for administrators only');
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    const seconds = reply.elapsedTime / 1000;
    durations.observe({ route, method: request.method, status: String(reply.statusCode) }, seconds);
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

  api.get(
    '/healthz',
    { config: publicRoute, schema: { summary: 'Liveness', security: [], response: { 200: HealthResponse } } },
    async () => ({ ok: true }),
  );

  api.get(
    '/metrics',
    {
      config: publicRoute,
      schema: { summary: 'Prometheus metrics (text exposition format)', security: [] },
    },
    async (_request, reply) => {
      reply.header('content-type', registry.contentType);
      return registry.metrics();
    },
  );

  api.get('/openapi.json', { config: publicRoute, schema: { hide: true } }, async () => app.swagger());

  authRoutes(api, store.users, signIns);
  jobRoutes(api, service, env, (token) => callerForToken(store.users, token), {
    holds: (request) => credentialHolds(store.users, signIns, request, request.caller),
    onSignOut: signIns.onEnd,
  });
  catalogRoutes(api, env);
  accountingRoutes(api, service);
  adminRoutes(api, adminOperations(store, env));
  sessionRoutes(api, sessions, deps.backend);
  sshKeyRoutes(api, sshKeys(store));
  if (deps.storageRoot !== undefined) fileRoutes(api, store.users, deps.storageRoot);

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
