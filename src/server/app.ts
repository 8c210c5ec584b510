import { setTimeout as sleep } from 'node:timers/promises';
import fastifySwagger from '@fastify/swagger';
import fastifyWebsocket from '@fastify/websocket';
import type { Static, TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import {
  type FastifyError,
  type FastifyInstance,
  type FastifyRequest,
  type FastifySchemaCompiler,
  type FastifySchemaValidationError,
  type FastifyTypeProvider,
  fastify,
  LogController,
} from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { WebSocket } from 'ws';
import { ServiceError } from '../jobs/errors.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import { type Caller, type JobService, statusOf } from '../jobs/service.ts';
import { formatIssue, type Issue, joinPath, ValidationError } from '../model/errors.ts';
import { isFinal, JOB_STATES, Job } from '../model/job.ts';
import { parser } from '../model/validate.ts';
import type { Role, Store } from '../store/store.ts';
import {
  AppRetrieveQuery,
  AppRetrieveResponse,
  type AppSummary,
  AppsResponse,
  BrowseQuery,
  BrowseResponse,
  BulkEmptyResponse,
  CreateHeaders,
  CreateProjectRequest,
  CreateRequest,
  CreateResponse,
  CreateTokenRequest,
  CreateUserRequest,
  ErrorBody,
  ExtendRequest,
  FollowMessage,
  GrantRequest,
  GrantResponse,
  HealthResponse,
  JobIdQuery,
  MemberRequest,
  MemberResponse,
  ProductsResponse,
  ProjectResponse,
  TerminateRequest,
  TokenResponse,
  UsageQuery,
  UsageResponse,
  UserResponse,
  WalletsResponse,
} from './schemas.ts';

export interface ServerDeps {
  service: JobService;
  store: Store;
  env: JobEnvironment;
  /** Fastify's `logger` option (pino options or true/false), or a ready pino logger. */
  logger?: boolean | object;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling; set by the authentication hook on every non-public route. */
    caller: Caller;
  }
  interface FastifyContextConfig {
    /** No token needed (health, metrics, the API description). */
    public?: boolean;
    /** Only administrators. */
    admin?: boolean;
  }
}

/**
 * The TypeBox type provider for the model's TypeBox (0.34): @fastify/type-provider-typebox 6 infers
 * with TypeBox 1, which reads the model's literal unions as `never`. Same definition otherwise.
 */
interface TypeBoxTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
  serializer: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
}

const DAY = 86_400_000;
const YEAR = 365 * DAY;
const BODY_LIMIT = 8 * 1024 * 1024;
const errors = { '4xx': ErrorBody, '5xx': ErrorBody };

/**
 * The HTTP API (UCloud-shaped): jobs, catalogue, products, accounting and administration, with
 * Bearer-token authentication, Prometheus metrics and /openapi.json. Every request and response
 * schema comes from src/model (through ./schemas.ts), so validation, types and documentation agree.
 */
export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const { service, store, env } = deps;
  const app = fastify({
    ...loggerOption(deps.logger),
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
    // Clients send nothing but close frames; browsers pass the token as a subprotocol.
    options: { maxPayload: 4096, handleProtocols: chooseProtocol },
  });

  // ---- metrics ---------------------------------------------------------------------------------

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'ucompute_jobs',
    help: 'Jobs in the store, by state',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const counts = store.countByState();
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
  });

  // ---- hooks and errors ------------------------------------------------------------------------

  app.addHook('onRequest', async (request) => {
    if (request.is404 || request.routeOptions.config.public === true) return;
    request.caller = authenticate(store, request);
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

  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ message: `there is no ${request.method} ${request.url.split('?')[0]}` }),
  );

  // ---- routes ----------------------------------------------------------------------------------

  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const publicRoute = { public: true };

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

  // Jobs.
  api.post(
    '/api/jobs',
    {
      schema: {
        summary: 'Create jobs',
        description:
          'Every item is checked before any is created: one bad item refuses the whole request (400).',
        tags: ['jobs'],
        headers: CreateHeaders,
        body: CreateRequest,
        response: { 200: CreateResponse, ...errors },
      },
    },
    async (request) => {
      const ids = await service.create(request.caller, request.body.items, {
        idempotencyKey: request.headers['idempotency-key'],
        project: request.headers.project,
      });
      return { responses: ids.map((id) => ({ id })) };
    },
  );

  api.get(
    '/api/jobs/browse',
    {
      schema: {
        summary: 'Browse jobs, newest first',
        tags: ['jobs'],
        querystring: BrowseQuery,
        response: { 200: BrowseResponse, ...errors },
      },
    },
    async (request) => service.browse(request.caller, request.query),
  );

  api.get(
    '/api/jobs/retrieve',
    {
      schema: {
        summary: 'Retrieve one job',
        tags: ['jobs'],
        querystring: JobIdQuery,
        response: { 200: Job, ...errors },
      },
    },
    async (request) => service.retrieve(request.caller, request.query.id),
  );

  api.post(
    '/api/jobs/terminate',
    {
      schema: {
        summary: 'Terminate jobs',
        tags: ['jobs'],
        body: TerminateRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      const ids = request.body.items.map((i) => i.id);
      await service.terminate(request.caller, ids);
      return { responses: ids.map(() => ({})) };
    },
  );

  api.post(
    '/api/jobs/extend',
    {
      schema: {
        summary: 'Extend the time allocation of running jobs',
        tags: ['jobs'],
        body: ExtendRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      await service.extend(request.caller, request.body.items);
      return { responses: request.body.items.map(() => ({})) };
    },
  );

  api.route({
    method: 'GET',
    url: '/api/jobs/follow',
    schema: {
      summary: 'Follow a job (WebSocket)',
      description:
        'A WebSocket. The first message carries every update so far; then one message per update ' +
        '(with `newStatus`) and per log chunk. The server closes it once the job has ended and its ' +
        'logs are complete. Browsers, which cannot set headers, may offer the subprotocol ' +
        '`bearer.<token>` (with another, such as `ucompute`, for the server to select).',
      tags: ['jobs'],
      querystring: JobIdQuery,
      response: { 101: FollowMessage, ...errors },
    },
    // Refuse unknown and others' jobs before the upgrade, so the client sees a 404.
    preHandler: async (request: FastifyRequest<{ Querystring: { id: string } }>) => {
      service.retrieve(request.caller, request.query.id);
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send({ message: 'this call needs a WebSocket' }),
    wsHandler: (socket, request) => {
      const { id } = request.query as { id: string };
      followJob(service, socket, request.caller, id, request.log);
    },
  });

  // Catalogue and products: fixed for the server's lifetime, so summarised once.
  const summaries: AppSummary[] = env.catalog.list().map(({ application: a }) => ({
    name: a.metadata.name,
    version: a.metadata.version,
    title: a.metadata.title,
    description: a.metadata.description,
    applicationType: a.invocation.applicationType,
    parameters: a.invocation.parameters.map((p) => ({
      name: p.name,
      type: p.type,
      title: p.title,
      optional: p.optional,
    })),
  }));

  api.get(
    '/api/apps',
    { schema: { summary: 'List applications', tags: ['apps'], response: { 200: AppsResponse, ...errors } } },
    async () => ({ items: summaries }),
  );

  api.get(
    '/api/apps/retrieve',
    {
      schema: {
        summary: 'Retrieve an application and its tool',
        tags: ['apps'],
        querystring: AppRetrieveQuery,
        response: { 200: AppRetrieveResponse, ...errors },
      },
    },
    async (request) => {
      const { name } = request.query;
      const version = request.query.version ?? env.catalog.versions(name).at(-1);
      const found = version !== undefined ? env.catalog.find(name, version) : undefined;
      if (!found) {
        throw new ServiceError(
          404,
          `application ${name}${request.query.version ? `@${version}` : ''} was not found`,
        );
      }
      return found;
    },
  );

  api.get(
    '/api/products',
    {
      schema: {
        summary: 'List products',
        tags: ['products'],
        response: { 200: ProductsResponse, ...errors },
      },
    },
    async () => ({ items: [...env.products] }),
  );

  // Accounting.
  api.get(
    '/api/accounting/wallets',
    {
      schema: {
        summary: "The caller's wallets (own and projects it manages)",
        tags: ['accounting'],
        response: { 200: WalletsResponse, ...errors },
      },
    },
    async (request) => ({ items: service.wallets(request.caller) }),
  );

  api.get(
    '/api/accounting/usage',
    {
      schema: {
        summary: 'Credits charged per bucket and category',
        tags: ['accounting'],
        querystring: UsageQuery,
        response: { 200: UsageResponse, ...errors },
      },
    },
    async (request) => {
      const to = request.query.to ?? Date.now();
      const from = request.query.from ?? Math.max(0, to - 30 * DAY);
      const bucket = request.query.bucket ?? 'day';
      if (from >= to) throw new ValidationError([{ path: 'from', message: 'must be before to' }]);
      const size = bucket === 'hour' ? 3_600_000 : DAY;
      const sums = new Map<string, { owner: string; category: string; start: number; credits: number }>();
      for (const account of service.accountsOf(request.caller)) {
        for (const c of store.charges(account, from, to)) {
          const start = Math.floor(c.chargedAt / size) * size;
          const key = `${account}\u0000${c.category}\u0000${start}`;
          const sum = sums.get(key);
          if (sum) sum.credits += c.credits;
          else sums.set(key, { owner: account, category: c.category, start, credits: c.credits });
        }
      }
      const items = [...sums.values()].sort(
        (a, b) => a.owner.localeCompare(b.owner) || a.category.localeCompare(b.category) || a.start - b.start,
      );
      return { from, to, bucket, items };
    },
  );

  const adminOnly = { admin: true };
  const categories = new Set(env.products.map((p) => p.category));

  api.post(
    '/api/accounting/allocations',
    {
      config: adminOnly,
      schema: {
        summary: 'Grant credits to an owner (administrators)',
        tags: ['accounting', 'admin'],
        body: GrantRequest,
        response: { 200: GrantResponse, ...errors },
      },
    },
    async (request) => {
      const { owner, category, credits } = request.body;
      const [kind, id] = owner.split(':') as ['user' | 'project', string];
      if (kind === 'user' ? !store.getUser(id) : !store.projectExists(id)) {
        throw new ServiceError(404, `${kind} ${id} was not found`);
      }
      if (!categories.has(category)) {
        throw new ValidationError([
          { path: 'category', message: `names no product category (there is ${[...categories].join(', ')})` },
        ]);
      }
      const start = request.body.start ?? Date.now();
      const end = request.body.end ?? start + YEAR;
      if (end <= start) throw new ValidationError([{ path: 'end', message: 'must be after start' }]);
      const allocation = store.grant(owner, category, credits, start, end);
      return { id: allocation, owner, category, credits, start, end };
    },
  );

  api.post(
    '/api/admin/users',
    {
      config: adminOnly,
      schema: {
        summary: 'Create a user (administrators)',
        tags: ['admin'],
        body: CreateUserRequest,
        response: { 200: UserResponse, ...errors },
      },
    },
    async (request) => {
      const { name } = request.body;
      const admin = request.body.admin ?? false;
      if (!store.createUser(name, admin)) throw new ServiceError(409, `user ${name} already exists`);
      return { name, admin };
    },
  );

  api.post(
    '/api/admin/projects',
    {
      config: adminOnly,
      schema: {
        summary: 'Create a project (administrators)',
        tags: ['admin'],
        body: CreateProjectRequest,
        response: { 200: ProjectResponse, ...errors },
      },
    },
    async (request) => {
      const { id, title } = request.body;
      if (!store.createProject(id, title)) throw new ServiceError(409, `project ${id} already exists`);
      return { id, title };
    },
  );

  api.post(
    '/api/admin/projects/members',
    {
      config: adminOnly,
      schema: {
        summary: "Add a project member, or change a member's role (administrators)",
        tags: ['admin'],
        body: MemberRequest,
        response: { 200: MemberResponse, ...errors },
      },
    },
    async (request) => {
      const { projectId, username, role } = request.body;
      if (!store.projectExists(projectId)) throw new ServiceError(404, `project ${projectId} was not found`);
      if (!store.getUser(username)) throw new ServiceError(404, `user ${username} was not found`);
      store.setMember(projectId, username, role as Role);
      return { projectId, username, role };
    },
  );

  api.post(
    '/api/admin/tokens',
    {
      config: adminOnly,
      schema: {
        summary: 'Make an API token for a user (administrators)',
        tags: ['admin'],
        body: CreateTokenRequest,
        response: { 200: TokenResponse, ...errors },
      },
    },
    async (request) => {
      const { username, description } = request.body;
      if (!store.getUser(username)) throw new ServiceError(404, `user ${username} was not found`);
      return { token: store.createToken(username, description) };
    },
  );

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

// ---- validation ----------------------------------------------------------------------------------

/**
 * Validates with the model's own compiled TypeBox checks (the schemas are TypeBox 0.34; the
 * published TypeBox compiler targets TypeBox 1), compiled once per route at startup. A failure
 * is explained by the same code as the service's own ValidationErrors, so messages agree.
 */
const compileValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const checked = parser(schema);
  // Query strings arrive as text: "10" must count as the integer 10.
  const convert = httpPart === 'querystring' || httpPart === 'params';
  return (data: unknown) => {
    const value = convert ? Value.Convert(schema, data) : data;
    if (checked.check(value)) return convert ? { value } : {};
    return {
      error: checked.issues(value).map(
        (issue): FastifySchemaValidationError => ({
          keyword: 'schema',
          instancePath: pathToPointer(issue.path),
          schemaPath: '#',
          params: { path: issue.path },
          message: issue.message,
        }),
      ),
    };
  };
};

/** `items[0].product.id` → `/items/0/product/id`: Ajv's form, for anything that reads `instancePath`. */
function pathToPointer(path: string): string {
  if (path === '') return '';
  return `/${path
    .replace(/\[(\d+)\]/g, '.$1')
    .split('.')
    .filter((s) => s !== '')
    .map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1'))
    .join('/')}`;
}

/** Ajv's `/items/0/product/id` → `items[0].product.id`. */
export function instancePathToPath(pointer: string): string {
  let path = '';
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path = /^\d+$/.test(key) ? joinPath(path, Number(key)) : joinPath(path, key);
  }
  return path;
}

function validationIssues(error: FastifyError): Issue[] {
  const context = (error as { validationContext?: string }).validationContext ?? 'body';
  return (error.validation ?? []).map((e) => {
    let path = typeof e.params?.path === 'string' ? e.params.path : instancePathToPath(e.instancePath);
    // Ajv reports a missing property at its parent.
    if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = joinPath(path, e.params.missingProperty);
    }
    return { path: path || context, message: e.message ?? 'is not valid' };
  });
}

// ---- errors --------------------------------------------------------------------------------------

/** What a failure becomes on the wire: never a stack trace, and 500 only for the unexpected. */
function errorResponse(error: FastifyError): { status: number; body: ErrorBody } {
  if (error.validation) {
    const issues = validationIssues(error);
    return { status: 400, body: { message: issues.map(formatIssue).join('; '), issues } };
  }
  if (error instanceof ValidationError) {
    return { status: 400, body: { message: error.issues.map(formatIssue).join('; '), issues: error.issues } };
  }
  if (error instanceof ServiceError) return { status: error.status, body: { message: error.message } };
  // Fastify's own refusals (bad JSON, wrong content type, body too large) are safe to repeat.
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && error.code?.startsWith('FST_')) {
    return { status, body: { message: error.message } };
  }
  return { status: 500, body: { message: 'internal error (the server log has the details)' } };
}

// ---- authentication ------------------------------------------------------------------------------

const BEARER = /^Bearer[ ]+([^\s]+)[ ]*$/i;
const PROTOCOL_PREFIX = 'bearer.';

function authenticate(store: Store, request: FastifyRequest): Caller {
  const token = tokenOf(request);
  if (token === undefined) {
    throw new ServiceError(
      401,
      'this call needs an API token: send the header Authorization: Bearer <token>',
    );
  }
  const user = token !== '' ? store.userForToken(token) : undefined;
  if (!user) throw new ServiceError(401, 'the API token is not valid');
  return { username: user.name, admin: user.admin };
}

/** The Bearer token, or '' when one is offered in a bad shape; undefined when none is offered. */
function tokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header !== undefined) return BEARER.exec(header)?.[1] ?? '';
  // Browsers cannot set headers on a WebSocket; they offer the token as a subprotocol instead.
  if (request.headers.upgrade?.toLowerCase() === 'websocket') {
    const offered = request.headers['sec-websocket-protocol'];
    const protocol = offered
      ?.split(',')
      .map((p) => p.trim())
      .find((p) => p.startsWith(PROTOCOL_PREFIX));
    if (protocol !== undefined) return protocol.slice(PROTOCOL_PREFIX.length);
  }
  return undefined;
}

/**
 * A client that offers subprotocols needs one selected back. Prefer one that is not the token;
 * a client that offered only `bearer.<token>` gets that back (browsers refuse an empty answer).
 */
function chooseProtocol(protocols: Set<string>): string | false {
  const all = [...protocols];
  return all.find((p) => !p.startsWith(PROTOCOL_PREFIX)) ?? all[0] ?? false;
}

// ---- following a job -----------------------------------------------------------------------------

interface Log {
  error(obj: object, msg?: string): void;
}

/**
 * Streams a job's updates and log chunks over a WebSocket until the job has ended and its logs
 * are complete, or the client goes away. Logs are read once the job has started: before that the
 * backend may not know the job and would end the stream at once.
 */
/** Log bytes queued for one follower before reading more: server memory stays bounded per reader. */
const FOLLOW_BUFFERED_BYTES = 256 * 1024;

function followJob(service: JobService, socket: WebSocket, caller: Caller, id: string, log: Log): void {
  const abort = new AbortController();
  let closed = false;
  let final = false;
  let logsStarted = false;
  let logsEnded = false;
  let unsubscribe = () => {};

  const send = (message: FollowMessage) => {
    if (!closed && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const finish = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    abort.abort();
    unsubscribe();
    socket.close(code, reason);
  };
  const maybeEnd = () => {
    if (final && logsEnded) finish(1000, 'the job has ended');
  };
  const startLogs = () => {
    if (logsStarted) return;
    logsStarted = true;
    (async () => {
      for await (const chunk of service.logs(caller, id, { follow: true, signal: abort.signal })) {
        if (closed) return;
        send({ updates: [], log: [chunk] });
        // Backpressure: the next chunk is read once the client took most of what is queued.
        while (!closed && socket.bufferedAmount > FOLLOW_BUFFERED_BYTES) await sleep(10);
      }
    })().then(
      () => {
        logsEnded = true;
        maybeEnd();
      },
      (err: unknown) => {
        log.error({ err, jobId: id }, 'following logs failed');
        finish(1011, 'reading the logs failed');
      },
    );
  };

  socket.on('close', () => {
    closed = true;
    abort.abort();
    unsubscribe();
  });

  let first: ReturnType<JobService['follow']>;
  try {
    first = service.follow(caller, id, (update, record) => {
      // Runs inside the service's update: it must never throw back into it.
      try {
        send({ updates: [update], log: [], newStatus: statusOf(record) });
        if (isFinal(record.state)) final = true;
        if (record.state === 'RUNNING' || final) startLogs();
        maybeEnd();
      } catch (err) {
        log.error({ err, jobId: id }, 'following a job failed');
      }
    });
  } catch (err) {
    const status = err instanceof ServiceError ? err.status : 500;
    if (status >= 500) log.error({ err, jobId: id }, 'following a job failed');
    finish(status === 404 ? 4404 : 1011, status === 404 ? 'the job was not found' : 'internal error');
    return;
  }
  unsubscribe = first.unsubscribe;
  if (closed) {
    unsubscribe();
    return;
  }
  const { job } = first;
  send({ updates: job.updates, log: [], newStatus: job.status });
  final = isFinal(job.status.state);
  if (final || job.status.startedAt !== undefined) startLogs();
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
