import type { Static, TSchema } from '@sinclair/typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyPluginAsync,
  FastifyTypeProvider,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Sessions } from '../interactive/sessions.ts';
import type { Backend } from '../jobs/backend.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import type { Store } from '../store/store.ts';
import type { PublicUrl } from './public-url.ts';
import { ErrorBody } from './schemas.ts';
import type { SignIns } from './sign-in.ts';

declare module 'fastify' {
  /**
   * What the route plugins take from the app: decorations set once by buildServer, before any
   * route is registered.
   */
  interface FastifyInstance {
    jobService: JobService;
    store: Store;
    jobEnvironment: JobEnvironment;
    /** The web interface's sign-ins (cookie sessions and one-time links). */
    signIns: SignIns;
    /** Interactive sessions of running jobs (web, VNC, shell). */
    sessions: Sessions;
    /** Where interactive sessions connect to (the service's own backend). */
    sessionBackend: Pick<Backend, 'connect' | 'shell'>;
    /** Where people reach this service: links are built from it, never from `Host`. */
    publicUrl: PublicUrl;
    /** How often running jobs' resources are sampled (ms). */
    resourceSampleMs: number;
  }
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

/**
 * The TypeBox type provider for the model's TypeBox (0.34): @fastify/type-provider-typebox 6 infers
 * with TypeBox 1, which reads the model's literal unions as `never`. Same definition otherwise.
 */
export interface TypeBoxTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
  serializer: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
}

/** The server as route modules see it: typed by the request and response schemas. */
export type Api = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/**
 * A group of routes: a Fastify plugin that takes what it needs from the app's decorations (and
 * its own options, when it has any).
 */
export type ApiRoutes<Options extends object = Record<never, never>> = FastifyPluginAsync<
  Options,
  RawServerDefault,
  TypeBoxTypeProvider
>;

/** Every route answers errors as `{message, issues?}`. */
export const errors = { '4xx': ErrorBody, '5xx': ErrorBody };

/** Route config: no token needed, or administrators only. */
export const publicRoute = { public: true };
export const adminOnly = { admin: true };
