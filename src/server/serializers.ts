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
    const context = JSON.stringify([externalSchemas, options]);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc) => {
        serialize ??= builtFor(route.schema as object, context, () => compile(route));
        return serialize(doc);
      };
    };
  };
}

/**
 * The serializers built in this process, by response schema (our schemas are constants) and the
 * app's shared schemas and options: a serializer depends on nothing else, so a process that builds
 * several apps (the tests build one per case) builds each once.
 */
const built = new WeakMap<object, Map<string, (doc: unknown) => string>>();

function builtFor(schema: object, context: string, build: () => (doc: unknown) => string) {
  const bySchema = built.get(schema) ?? new Map<string, (doc: unknown) => string>();
  built.set(schema, bySchema);
  const known = bySchema.get(context);
  if (known) return known;
  const serialize = build();
  bySchema.set(context, serialize);
  return serialize;
}
