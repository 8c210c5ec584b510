import { execFileSync, spawn } from 'node:child_process';
import {
  chownSync,
  existsSync,
  fchownSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import pg from 'pg';

// A PostgreSQL server of the tests' own (Debian's postgresql): initdb in a temporary folder, run as
// the postgres user when the tests run as root, on loopback at a port picked at random. One per test process, started on first use and stopped at exit; each test
// gets a database of its own. Its data folder is a copy of one initdb made once per machine (see
// `template`).

const ROOT = '/usr/lib/postgresql';

/** The folder of PostgreSQL's programs, or undefined when none is installed. */
export function postgresBin(): string | undefined {
  const versions = existsSync(ROOT) ? readdirSync(ROOT).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((v) => join(ROOT, v, 'bin')).find((bin) => existsSync(join(bin, 'initdb')));
  return found;
}

/** Whether the PostgreSQL tests run: a server is installed, or CI=true (where its absence fails them). */
export const POSTGRES_TESTED = postgresBin() !== undefined || process.env.CI === 'true';

interface Server {
  /** The postmaster's process id. */
  pid: number;
  url: (database: string) => string;
  /** The server's log file (statements too, for a database set to log them). */
  log: string;
}

let server: Promise<Server> | undefined;
let databases = 0;
/** Settings the server starts with beyond ours (`-c name=value`), set before its first use. */
let settings: Record<string, string> = {};

/**
 * Starts the server, when it starts, with these settings too (e.g. a bench's
 * `shared_preload_libraries`); throws once it has started: they would not apply.
 */
export function postgresSettings(more: Record<string, string>): void {
  if (server) throw new Error("the tests' PostgreSQL server has started: its settings are set");
  settings = { ...settings, ...more };
}

/** As the postgres user when we are root (PostgreSQL refuses root); as ourselves otherwise. */
function serverUser(): { uid: number; gid: number } | Record<string, never> {
  if (process.getuid?.() !== 0) return {};
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
  };
}

/** Whether a server answers at this URL now. */
async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function start(): Promise<Server> {
  const bin = postgresBin();
  if (!bin)
    throw new Error(
      'PostgreSQL is not installed (Debian: apt-get install postgresql; scripts/setup.sh does)',
    );
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-postgres-'));
  if ('uid' in user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  execFileSync('cp', ['-a', template(bin, user), data]);
  const log = openSync(join(dir, 'log'), 'a');
  if ('uid' in user) fchownSync(log, user.uid, user.gid);
  // A port of our own: picked at random, another tried when it is taken.
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    const child = spawn(
      join(bin, 'postgres'),
      [
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'max_connections=200',
        ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
      ],
      { stdio: ['ignore', log, log], ...user },
    );
    const url = (database: string) => `postgres://ucompute@127.0.0.1:${port}/${database}`;
    // Up to a minute for it to answer: the machine may be busy.
    let up = false;
    for (let i = 0; i < 600 && !up && child.exitCode === null; i++) {
      up = await answers(url('postgres'));
      if (!up) await new Promise((r) => setTimeout(r, 100));
    }
    if (!up) {
      child.kill('SIGKILL');
      // Taken by another: try another port; anything else is a failure to report.
      if (readFileSync(join(dir, 'log'), 'utf8').includes('could not bind')) continue;
      throw new Error(`PostgreSQL did not start: ${readFileSync(join(dir, 'log'), 'utf8')}`);
    }
    child.unref();
    // Immediate shutdown when the tests end, by the guardian: nothing of it is kept.
    guard(child.pid!, dir);
    return { pid: child.pid!, url, log: join(dir, 'log') };
  }
  throw new Error('PostgreSQL found no free port in 20 tries');
}

/**
 * An initdb'd data folder that each server's is copied from (`cp -a`: 0.1 CPU-s, where initdb took
 * ~1 CPU-s in every test process that used PostgreSQL): made once per machine and PostgreSQL
 * version in the temporary folder, beside Node's compile cache. Made in a folder of its own and
 * renamed into place, so that it is seen whole or not at all; when two processes make it at once,
 * the first rename wins and the other's copy is removed.
 */
function template(bin: string, user: ReturnType<typeof serverUser>): string {
  const version = basename(dirname(bin));
  const ready = join(tmpdir(), `ucompute-postgres-template-${version}-${process.getuid?.() ?? 0}`);
  const owner = 'uid' in user ? user.uid : process.getuid?.();
  if (madeByServerUser(ready, owner)) return ready;
  const dir = mkdtempSync(`${ready}.making-`);
  if ('uid' in user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  execFileSync(
    join(bin, 'initdb'),
    ['-D', data, '-A', 'trust', '-U', 'ucompute', '-E', 'UTF8', '--no-sync'],
    {
      stdio: 'pipe',
      ...user,
    },
  );
  try {
    renameSync(data, ready);
  } catch (error) {
    if (!madeByServerUser(ready, owner)) throw error;
  }
  rmSync(dir, { recursive: true, force: true });
  return ready;
}

/**
 * Whether `ready` is a whole template that the server's user made: a folder (not a link), owned by
 * that user and closed to everyone else, as initdb leaves it. The name is predictable in a shared
 * temporary folder, so one planted there by another user is refused, naming it, instead of being
 * copied and run by the server.
 */
function madeByServerUser(ready: string, owner: number | undefined): boolean {
  let found: ReturnType<typeof lstatSync>;
  try {
    found = lstatSync(ready);
  } catch {
    return false;
  }
  if (!found.isDirectory() || found.uid !== owner || (found.mode & 0o077) !== 0) {
    throw new Error(
      `${ready} is not a PostgreSQL template made by the server's user (uid ${owner}, mode 0700): remove it`,
    );
  }
  return existsSync(join(ready, 'global', 'pg_control'));
}

/**
 * A process of its own that shuts the server down (SIGQUIT: immediate) and removes its folder once
 * this process is gone however it ended: 'exit' handlers do not run when a signal ends it (SIGTERM
 * from a test runner that gives up, SIGKILL, SIGPIPE), and the server would run on. It learns of
 * that end as its stdin (a pipe only this process holds) closes; it is in a session of its own, so
 * that a signal to this process's group does not end it first. The folder goes only once the server
 * has exited (up to 10 s): removed while it was still shutting down, its files came back and ~15
 * empty folders a day were left in /tmp.
 */
function guard(pid: number, dir: string): void {
  const script = `process.stdin.resume().once('end', () => {
    const running = () => { try { process.kill(${pid}, 0); return true; } catch { return false; } };
    try { process.kill(${pid}, 'SIGQUIT'); } catch {}
    let waits = 0;
    const remove = () => {
      if (running() && ++waits < 200) return setTimeout(remove, 50);
      require('node:fs').rmSync(${JSON.stringify(dir)}, { recursive: true, force: true, maxRetries: 3 });
    };
    remove();
  });`;
  const guardian = spawn(process.execPath, ['-e', script], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
    env: {},
  });
  guardian.unref();
  // The pipe does not keep this process alive: it only tells the guardian when it is gone.
  (guardian.stdin as unknown as { unref(): void }).unref();
}

/** The tests' PostgreSQL server's process id (it is started if it was not). */
export async function postgresPid(): Promise<number> {
  server ??= start();
  return (await server).pid;
}

/** The tests' PostgreSQL server's log file (it is started if it was not). */
export async function postgresLog(): Promise<string> {
  server ??= start();
  return (await server).log;
}

/** The URL of a new, empty database on the tests' PostgreSQL server. */
export async function newPostgresDatabase(): Promise<string> {
  server ??= start();
  const s = await server;
  const name = `test_${process.pid}_${++databases}`;
  const admin = new pg.Client({ connectionString: s.url('postgres') });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  return s.url(name);
}
