import pg from 'pg';
import type { Row } from '../rows.ts';
import type { Query } from './connection.ts';
import { inlined, literal } from './literals.ts';

// Statements as sent to PostgreSQL: written once in SQLite's style (`?`), numbered here, and
// prepared on each connection (named statements with parameters, or SQL PREPARE and EXECUTE in
// simple queries), so that PostgreSQL parses and plans each once per connection.

/** A statement as sent: `?` placeholders numbered; its number among those prepared; whether it changes the directory. */
export interface Statement {
  text: string;
  prepared: number | undefined;
  writesDirectory: boolean;
}

/** A statement that changes who a token names or who is in a project. */
const DIRECTORY_WRITE = /\b(?:insert\s+into|update|delete\s+from)\s+(?:users|tokens|memberships)\b/i;

/**
 * Statements prepared at most (each connection keeps them): a job listing's filters make
 * hundreds of texts, which are parsed and planned each time instead.
 */
const MAX_PREPARED = 200;
const statements = new Map<string, Statement>();
/** `?` placeholders as `$1`, `$2`, …: the statements are written once, in SQLite's style. */
export function statement(text: string): Statement {
  let out = statements.get(text);
  if (out === undefined) {
    let n = 0;
    out = {
      text: text.replace(/\?/g, () => `$${++n}`),
      prepared: statements.size < MAX_PREPARED ? statements.size : undefined,
      writesDirectory: DIRECTORY_WRITE.test(text),
    };
    statements.set(text, out);
  }
  return out;
}

/**
 * Raised when another replica's migration changed a table under a prepared `select *`: the
 * statements are then prepared again under new names (`prepareAgain`).
 */
export const stalePlan = (e: unknown) => (e as Error).message === 'cached plan must not change result type';
let preparedRound = 0;
/** From now on, the statements are prepared again, under new names. */
export function prepareAgain(): void {
  preparedRound++;
}

/**
 * Statements on `client`, each prepared once per connection (a named statement: PostgreSQL parses
 * and plans it once, not per call); `wroteDirectory` is told after one that changes the directory.
 */
export function queryOn(client: pg.Pool | pg.PoolClient, wroteDirectory: () => void): Query {
  const run = async (text: string, values: unknown[]) => {
    const s = statement(text);
    const send = () =>
      client.query<Row>(
        s.prepared === undefined
          ? { text: s.text, values }
          : { name: `uc${preparedRound}_${s.prepared}`, text: s.text, values },
      );
    const result = await send().catch((e: unknown) => {
      if (!stalePlan(e)) throw e;
      preparedRound++;
      // On the pool the statement was a transaction of its own, and is sent again; in a
      // transaction, the transaction has failed.
      if (client instanceof pg.Pool) return send();
      throw e;
    });
    if (s.writesDirectory) wroteDirectory();
    return result;
  };
  const query = (async (text: string, ...params: unknown[]) => (await run(text, params)).rows) as Query;
  query.changed = async (text, ...params) => (await run(text, params)).rowCount ?? 0;
  return query;
}

/** What PREPARE takes (not `commit`, `set` …). */
const PREPARABLE = /^\s*(?:select|insert|update|delete|with|values)\b/i;

/** The names of the statements prepared (SQL PREPARE) on each connection: kept for its life. */
const preparedOnConnection = new WeakMap<pg.PoolClient, Set<string>>();

/** Records that the statements `names` are prepared on `client` (their PREPARE ran there). */
export function preparedOn(client: pg.PoolClient, names: Iterable<string>): void {
  const known = preparedOnConnection.get(client) ?? new Set<string>();
  preparedOnConnection.set(client, known);
  for (const name of names) known.add(name);
}

/**
 * A statement to send in a simple query on `client`, values as literals: as EXECUTE of the
 * statement prepared on that connection (PostgreSQL parses and plans it once there, not at each
 * call; from its sixth call, a generic plan), after its PREPARE the first time (`prepare`, to send
 * before it in the same query); inlined as is when it is not among those prepared (`statement`).
 */
export function simpleOn(
  client: pg.PoolClient,
  text: string,
  values: readonly unknown[],
): { prepare?: { name: string; text: string }; text: string } {
  const s = statement(text);
  if (s.prepared === undefined || !PREPARABLE.test(text)) return { text: inlined(text, values) };
  // The same check as inlined's: every `?` is a placeholder, each given its value.
  const placeholders = text.split('?').length - 1;
  if (placeholders !== values.length) {
    throw new Error(
      `a statement with ${placeholders} placeholders given ${values.length} values: ${text.slice(0, 80)}`,
    );
  }
  const name = `ucs${preparedRound}_${s.prepared}`;
  const run = values.length === 0 ? `execute ${name}` : `execute ${name}(${values.map(literal).join(', ')})`;
  return preparedOnConnection.get(client)?.has(name)
    ? { text: run }
    : { prepare: { name, text: `prepare ${name} as ${s.text}` }, text: run };
}
