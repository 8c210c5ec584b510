import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import { lazySerializers } from '../src/server/serializers.ts';

const route = {
  method: 'GET',
  url: '/things',
  httpStatus: '200',
  schema: { type: 'object', properties: { n: { type: 'integer' } } },
};

test('a route’s serializer is built at its first answer, once, and answers as the eager one', () => {
  const built: string[] = [];
  const eager: SerializerFactory = () => (r) => {
    built.push(r.url);
    return (doc) => JSON.stringify({ n: Math.trunc((doc as { n: number }).n) });
  };
  const serialize = lazySerializers(eager)()(route);
  assert.deepEqual(built, []);
  assert.equal(serialize({ n: 1.5 }), '{"n":1}');
  assert.equal(serialize({ n: 2 }), '{"n":2}');
  assert.deepEqual(built, ['/things']);
});

test('with fast-json-stringify: only the schema’s fields are written', () => {
  const serialize = lazySerializers()()(route);
  assert.equal(serialize({ n: 3, secret: 'x' }), '{"n":3}');
});
