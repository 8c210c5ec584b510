import pg from 'pg';

// Values as literals in statements sent without parameters (simple queries: several statements
// in one round trip), rendered as node-postgres would send them as parameters.

/**
 * A value as a literal in a statement sent without parameters, as node-postgres would send it as
 * a parameter (its prepareValue): text, typed by its context in the statement. What it would send
 * otherwise than as its text (a Date in the process's time zone, a Buffer as bytea, an object's
 * toPostgres), or could not send at all (a NUL byte), is refused: the statements inlined here never
 * pass them, and a wrong rendering would be written silently.
 */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  return pg.escapeLiteral(Array.isArray(value) ? arrayText(value) : scalarText(value));
}

/** A value other than null and arrays as its text. */
function scalarText(value: unknown): string {
  switch (typeof value) {
    case 'string':
      // PostgreSQL's text holds no NUL; in a simple query it would end the statement's text.
      if (value.includes('\0')) throw new Error('a NUL byte cannot be sent to PostgreSQL as text');
      return value;
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(value);
    case 'object':
      if (
        value instanceof Date ||
        ArrayBuffer.isView(value) ||
        value instanceof ArrayBuffer ||
        typeof (value as { toPostgres?: unknown }).toPostgres === 'function'
      ) {
        throw new Error(`not sent as a literal here: ${Object.prototype.toString.call(value)}`);
      }
      // JSON escapes every control character: no NUL comes out.
      return JSON.stringify(value);
    default:
      throw new Error(`not sent as a literal here: a ${typeof value}`);
  }
}

/** An array as PostgreSQL's text form of arrays: `{"a","b",NULL}`, `{{"1","2"},{"3","4"}}`. */
function arrayText(xs: readonly unknown[]): string {
  const item = (x: unknown): string =>
    x === null || x === undefined
      ? 'NULL'
      : Array.isArray(x)
        ? arrayText(x)
        : `"${scalarText(x).replace(/["\\]/g, '\\$&')}"`;
  return `{${xs.map(item).join(',')}}`;
}

/**
 * `text` with its `?` placeholders replaced by `values` as literals: a statement that can go with
 * another in one simple query (one round trip). Typed as a parameter would be: from its context.
 * Every `?` of the text is a placeholder (as for statements sent with parameters): a `?` in a
 * comment, a string or an operator (jsonb's `?|`) would take a value meant for the next one, so a
 * text whose count of them is not the number of values is refused, never sent.
 */
export function inlined(text: string, values: readonly unknown[]): string {
  const parts = text.split('?');
  if (parts.length - 1 !== values.length) {
    throw new Error(
      `a statement with ${parts.length - 1} placeholders given ${values.length} values: ${text.slice(0, 80)}`,
    );
  }
  let out = parts[0]!;
  for (let i = 0; i < values.length; i++) out += literal(values[i]) + parts[i + 1]!;
  return out;
}
