import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler, type ValueError } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { type Issue, joinPath, ValidationError } from './errors.ts';

/**
 * A compiled schema: `parse` returns the typed value or throws a ValidationError whose issues
 * name the offending field. Tagged unions (schemas carrying `discriminator`) are explained by the
 * variant their tag selects, so "value: Expected integer" comes out instead of "no union matched".
 */
export interface Parser<T extends TSchema> {
  schema: T;
  check(value: unknown): value is Static<T>;
  parse(value: unknown, path?: string): Static<T>;
  issues(value: unknown, path?: string): Issue[];
}

/** Compiled checks by schema: schemas are constants, and every server built in a process checks with the same. */
const compiledChecks = new WeakMap<TSchema, ReturnType<typeof TypeCompiler.Compile>>();

function compiledCheck(schema: TSchema) {
  const known = compiledChecks.get(schema);
  if (known) return known;
  const compiled = TypeCompiler.Compile(schema);
  compiledChecks.set(schema, compiled);
  return compiled;
}

export function parser<T extends TSchema>(schema: T): Parser<T> {
  const compiled = compiledCheck(schema);
  const issues = (value: unknown, path = ''): Issue[] => explain(schema, value, path);
  return {
    schema,
    check: (value): value is Static<T> => compiled.Check(value),
    parse(value, path = '') {
      if (compiled.Check(value)) return value;
      throw new ValidationError(issues(value, path));
    },
    issues,
  };
}

const MAX_ISSUES = 20;

function explain(schema: TSchema, value: unknown, path: string): Issue[] {
  const out: Issue[] = [];
  const seen = new Set<string>();
  for (const error of Value.Errors(schema, value)) {
    if (out.length >= MAX_ISSUES) break;
    for (const issue of explainError(error, path)) {
      const key = `${issue.path}\u0000${issue.message}`;
      if (!seen.has(key)) {
        seen.add(key);
        out.push(issue);
      }
    }
  }
  // A missing field also fails its type check; "is required" says all there is to say.
  const required = new Set(out.filter((i) => i.message === 'is required').map((i) => i.path));
  const kept = out.filter((i) => i.message === 'is required' || !required.has(i.path));
  return kept.length > 0 ? kept : [{ path, message: 'is not valid' }];
}

function explainError(error: ValueError, base: string): Issue[] {
  const path = pointerToPath(base, error.path);
  const tag = (error.schema as { discriminator?: string }).discriminator;
  if (tag !== undefined && error.schema.anyOf) {
    const value = error.value as Record<string, unknown> | null;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return [{ path, message: 'must be an object' }];
    }
    const variants = error.schema.anyOf as TSchema[];
    const chosen = variants.find((v) => v.properties?.[tag]?.const === value[tag]);
    if (!chosen) {
      const allowed = variants.map((v) => JSON.stringify(v.properties?.[tag]?.const)).join(', ');
      return [{ path: joinPath(path, tag), message: `must be one of ${allowed}` }];
    }
    return explain(chosen, value, path);
  }
  // A union of differently shaped things (a word or an item object): explain by the one variant
  // that has the value's shape, when exactly one does.
  if (Array.isArray(error.schema.anyOf)) {
    const shaped = (error.schema.anyOf as TSchema[]).filter((v) => sameShape(v, error.value));
    if (shaped.length === 1 && shaped[0] !== undefined) return explain(shaped[0], error.value, path);
  }
  return [{ path, message: describe(error) }];
}

function sameShape(schema: TSchema, value: unknown): boolean {
  if (Array.isArray(schema.anyOf) && schema.discriminator === undefined) {
    return (schema.anyOf as TSchema[]).some((v) => sameShape(v, value));
  }
  if (schema.discriminator !== undefined) return hasType('object', value);
  return typeof schema.type === 'string' && hasType(schema.type, value);
}

function describe(error: ValueError): string {
  const s = error.schema as Record<string, unknown>;
  const v = error.value;
  if (error.message.startsWith('Expected required property')) return 'is required';
  if (error.message === 'Unexpected property') return 'is not a known field';
  if (s.const !== undefined) return `must be ${JSON.stringify(s.const)}`;
  if (Array.isArray(s.anyOf) && s.anyOf.every((x: { const?: unknown }) => x.const !== undefined)) {
    return `must be one of ${s.anyOf.map((x: { const?: unknown }) => JSON.stringify(x.const)).join(', ')}`;
  }
  if (typeof s.type === 'string' && !hasType(s.type, v)) return `must be ${TYPE_NAMES[s.type] ?? s.type}`;
  if (Array.isArray(s.anyOf) && s.anyOf.every((x: { type?: unknown }) => typeof x.type === 'string')) {
    return `must be ${s.anyOf.map((x: { type: string }) => TYPE_NAMES[x.type] ?? x.type).join(' or ')}`;
  }
  if (typeof v === 'number') {
    if (typeof s.minimum === 'number' && v < s.minimum) return `must be >= ${s.minimum}`;
    if (typeof s.maximum === 'number' && v > s.maximum) return `must be <= ${s.maximum}`;
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum)
      return `must be > ${s.exclusiveMinimum}`;
  }
  if (typeof v === 'string') {
    if (typeof s.minLength === 'number' && v.length < s.minLength) {
      return s.minLength === 1 ? 'must not be empty' : `must be at least ${s.minLength} characters`;
    }
    if (typeof s.maxLength === 'number' && v.length > s.maxLength)
      return `must be at most ${s.maxLength} characters`;
    if (typeof s.pattern === 'string')
      return s.description ? `must be ${s.description}` : `must match ${s.pattern}`;
  }
  if (Array.isArray(v)) {
    if (typeof s.minItems === 'number' && v.length < s.minItems)
      return `must have at least ${s.minItems} items`;
    if (typeof s.maxItems === 'number' && v.length > s.maxItems)
      return `must have at most ${s.maxItems} items`;
  }
  return error.message.replace(/^Expected/, 'must be').toLowerCase();
}

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'an object',
  array: 'a list',
  null: 'null',
};

function hasType(type: string, v: unknown): boolean {
  switch (type) {
    case 'integer':
      return Number.isInteger(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    case 'array':
      return Array.isArray(v);
    case 'null':
      return v === null;
    default:
      return typeof v === type;
  }
}

function pointerToPath(base: string, pointer: string): string {
  let path = base;
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path = /^\d+$/.test(key) ? joinPath(path, Number(key)) : joinPath(path, key);
  }
  return path;
}
