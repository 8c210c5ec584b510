import { Kind, type TSchema } from '@sinclair/typebox';
import { type Issue, joinPath } from '../model/errors.ts';

/**
 * Reads a parsed YAML document the way UCloud's own readers do before the strict check runs:
 * Jackson in the Kotlin app store (unknown properties ignored, a single value accepted as a list,
 * any scalar read as text where text is expected) and the Go decoder of core2 (unknown keys
 * ignored, scalars decoded into strings by their source text, so `version: 1.10` is "1.10").
 * Unknown keys are dropped with a warning; everything else is left for the schema to judge.
 */

/** The source text of the YAML scalar at a path of the document, when there is one. */
export type SourceText = (path: readonly (string | number)[]) => string | undefined;

/** Why some keys found in UCloud's own catalogues mean nothing, said where they are dropped. */
const IGNORED_BECAUSE: Record<string, string> = {
  default_value: 'UCloud does not read it either; a default is written `defaultValue`',
  defaultTasksPerNode: 'UCloud does not read it either',
};

export function readLeniently(
  schema: TSchema,
  value: unknown,
  sourceText: SourceText,
): { value: unknown; warnings: Issue[] } {
  const warnings: Issue[] = [];
  const read = (s: TSchema, v: unknown, path: string, at: (string | number)[]): unknown => {
    if (isMapping(v)) {
      const target = mappingSchema(s, v);
      if (!target) return v;
      const out: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(v)) {
        const childSchema = target[Kind] === 'Record' ? recordValues(target) : target.properties?.[key];
        if (childSchema === undefined) {
          const because = IGNORED_BECAUSE[key];
          warnings.push({
            path: joinPath(path, key),
            message: `is not a UCloud YAML v1 field: ignored${because ? ` (${because})` : ''}`,
          });
          continue;
        }
        // An own key even for `__proto__`, as the YAML parser made it, so the checks after see it.
        Object.defineProperty(out, key, {
          value: read(childSchema, child, joinPath(path, key), [...at, key]),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    if (Array.isArray(v)) {
      const items = listItems(s);
      return items ? v.map((item, i) => read(items, item, joinPath(path, i), [...at, i])) : v;
    }
    if (v === null || v === undefined) return v;
    // A single value where a list is expected is a list of one (Jackson's ACCEPT_SINGLE_VALUE_AS_ARRAY).
    const items = accepts(s, 'Array') && !accepts(s, typeof v) ? listItems(s) : undefined;
    if (items) return [read(items, v, path, at)];
    if ((typeof v === 'number' || typeof v === 'boolean') && accepts(s, 'String')) {
      return sourceText(at) ?? String(v);
    }
    return v;
  };
  return { value: read(schema, value, '', []), warnings };
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The schema and its union members, flattened. */
function variants(s: TSchema): TSchema[] {
  return s[Kind] === 'Union' ? (s.anyOf as TSchema[]).flatMap(variants) : [s];
}

const KIND_OF_TYPE: Record<string, string> = { number: 'Number', boolean: 'Boolean', string: 'String' };

/** Whether the schema takes values of this kind (a TypeBox kind or a `typeof` name). */
function accepts(s: TSchema, kind: string): boolean {
  const wanted = KIND_OF_TYPE[kind] ?? kind;
  return variants(s).some(
    (v) =>
      v[Kind] === wanted ||
      (wanted === 'Number' && v[Kind] === 'Integer') ||
      (v[Kind] === 'Literal' && typeof v.const === kind),
  );
}

function listItems(s: TSchema): TSchema | undefined {
  return variants(s).find((v) => v[Kind] === 'Array')?.items as TSchema | undefined;
}

function recordValues(s: TSchema): TSchema {
  return Object.values(s.patternProperties as Record<string, TSchema>)[0]!;
}

/**
 * The mapping schema a value is read with: the only one, or the one whose literal fields (the
 * `type: ...` tag) all match. None when no member fits; the strict check then says why.
 */
function mappingSchema(s: TSchema, v: Record<string, unknown>): TSchema | undefined {
  const mappings = variants(s).filter((m) => m[Kind] === 'Object' || m[Kind] === 'Record');
  if (mappings.length <= 1) return mappings[0];
  const matching = mappings.filter((m) =>
    Object.entries((m.properties ?? {}) as Record<string, TSchema>).every(
      ([key, p]) => p[Kind] !== 'Literal' || v[key] === p.const,
    ),
  );
  return matching.length === 1 ? matching[0] : undefined;
}
