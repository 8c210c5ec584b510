import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/**
 * Fastify's response serializers (fast-json-stringify), each built at its route's first answer
 * instead of at start. Building them all is what `ready()` spent its time on: ~0.8 s of CPU for
 * our routes' response schemas (the Job schema is large and appears in many routes), 2–3 s on a
 * loaded machine, paid by every server start — a test's, and provider mode's before it could
 * register its products with Core. A route that never answers never pays.
 */
export function lazySerializers(eager: SerializerFactory = SerializerSelector()): SerializerFactory {
  return (externalSchemas, options) => {
    const compile = eager(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc) => {
        serialize ??= compile(route);
        return serialize(doc);
      };
    };
  };
}
