/**
 * The Ajv behind test/support/kubernetes-schemas.ts, and its validators compiled once per machine.
 *
 * Reading the schemas (2.7 MB of OpenAPI and CRDs) and compiling the 9 kinds the fake API server
 * validates took ~0.7 CPU-s in every process that starts one; loaded from here, ~0.1. Each kind's
 * validator is kept as Ajv's standalone code under node_modules/.cache, in a folder named by a
 * hash of all it came from (the fixtures, these two modules, Ajv's version): a process that finds
 * a kind there loads its code (and Node's compile cache keeps that compiled too).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { _, Ajv, stringify, type ValidateFunction } from 'ajv';
import { _Code } from 'ajv/dist/compile/codegen/code.js';
import standalone from 'ajv/dist/standalone/index.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';

export const LIST_MAP_KEYWORD = 'ucomputeListMapKeys';

export interface ListMapSpec {
  keys: string[];
  defaults: Record<string, unknown>;
}

export function createAjv(): Ajv {
  const ajv = new Ajv({
    strict: false, // OpenAPI documents carry x-* extensions, `components`, `discriminator` data, etc.
    // source: for the standalone code; the formats' code is how that code finds them.
    code: { optimize: false, source: true, formats: _`require("ajv-formats/dist/formats.js").fullFormats` },
    allErrors: true,
    allowUnionTypes: true,
    formats: {
      int32: fullFormats.int32,
      int64: fullFormats.int64,
      byte: fullFormats.byte,
      'date-time': fullFormats['date-time'],
    },
  });
  ajv.addKeyword({
    keyword: LIST_MAP_KEYWORD,
    type: 'array',
    schemaType: 'object',
    error: { message: ({ params }) => _`${params.message}` },
    // Generated code (a keyword's `validate` function cannot be written out as standalone code):
    // it calls listMapDuplicates, copied into the code as its source, and reports each duplicate.
    code(cxt) {
      const { gen, data } = cxt;
      const spec = cxt.schema as ListMapSpec;
      const find = gen.scopeValue('func', {
        ref: listMapDuplicates,
        code: new _Code(listMapDuplicates.toString()),
      });
      const found = gen.const(
        'duplicates',
        _`${find}(${data}, ${stringify(spec.keys)}, ${stringify(spec.defaults)})`,
      );
      gen.forOf('duplicate', found, (duplicate) => {
        const at = gen.const('at', _`${duplicate}.at`);
        cxt.error(false, { message: _`${duplicate}.message` }, { instancePath: at });
      });
    },
  });
  return ajv;
}

/**
 * `x-kubernetes-list-type: map`: the API server rejects custom resources whose list items repeat a
 * key. Self-contained (no names from outside it): the standalone code holds a copy of its source.
 */
function listMapDuplicates(
  data: unknown[],
  keys: string[],
  defaults: Record<string, unknown>,
): { at: string; message: string }[] {
  const seen = new Map<string, number>();
  const duplicates: { at: string; message: string }[] = [];
  data.forEach((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return;
    const values = keys.map((key) => (item as Record<string, unknown>)[key] ?? defaults[key] ?? null);
    const identity = JSON.stringify(values);
    const first = seen.get(identity);
    if (first === undefined) {
      seen.set(identity, index);
      return;
    }
    const described = keys.map((key, i) => `${key}=${JSON.stringify(values[i])}`).join(', ');
    duplicates.push({
      at: String(index),
      message: `duplicate entry: ${described} is already used by item [${first}]`,
    });
  });
  return duplicates;
}

const require = createRequire(import.meta.url);

/**
 * The cache's folder for these inputs (the files the schemas are read from): what they hold,
 * these modules' and Ajv's version decide its name, so a change to any of them starts a new one.
 */
export function cacheFolder(inputs: string[]): string {
  const hash = createHash('sha256');
  const modules = [import.meta.filename, join(import.meta.dirname, 'kubernetes-schemas.ts')];
  for (const file of [...modules, ...inputs]) hash.update(file).update(readFileSync(file));
  hash.update(String((require('ajv/package.json') as { version: string }).version));
  const root = join(import.meta.dirname, '../../node_modules/.cache/ucompute-kubernetes-validators');
  return join(root, hash.digest('hex').slice(0, 16));
}

/** The path of `name` in `folder`, its text made by `make` and written there (whole: renamed into place) when missing. */
export function cached(folder: string, name: string, make: () => string): string {
  const file = join(folder, name);
  if (existsSync(file)) return file;
  const text = make();
  mkdirSync(folder, { recursive: true });
  writeFileSync(`${file}.${process.pid}`, text);
  renameSync(`${file}.${process.pid}`, file);
  return file;
}

/** The validator kept in `folder` as `name`, compiled by `compile` (in its `ajv`) and written there when missing. */
export function cachedValidator(
  folder: string,
  name: string,
  compile: () => { ajv: Ajv; validate: ValidateFunction },
): ValidateFunction {
  const file = cached(folder, `${name}.cjs`, () => {
    const { ajv, validate } = compile();
    // A CommonJS module to TypeScript: its function is its `default` (Node gives it as both).
    return standalone.default(ajv, validate);
  });
  return require(file) as ValidateFunction;
}
