import type { Static, TSchema } from '@sinclair/typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyTypeProvider,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import { ErrorBody } from './schemas.ts';

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

/** Every route answers errors as `{message, issues?}`. */
export const errors = { '4xx': ErrorBody, '5xx': ErrorBody };

/** Route config: no token needed, or administrators only. */
export const publicRoute = { public: true };
export const adminOnly = { admin: true };
