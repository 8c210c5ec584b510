/** `ucompute serve` as a child process, for the tests that talk to a real server. */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { connect } from '../../src/cli/client.ts';
import type { Job, JobState } from '../../src/model/job.ts';
import { BIN, CHILD_ENV } from './cli.ts';
import { ROOT } from './paths.ts';
import { until } from './until.ts';

/** The Node flags of ./ucompute's `exec node … bin/ucompute.js` line: serve as it runs there. */
export function ucomputeNodeFlags(): string[] {
  const line = /^exec node (.*) "\$here\/bin\/ucompute\.js"/m.exec(
    readFileSync(join(ROOT, 'ucompute'), 'utf8'),
  );
  if (!line) throw new Error('./ucompute has no `exec node … bin/ucompute.js` line');
  return line[1]!.split(' ');
}

/**
 * The environment ./ucompute sets before its `exec node` line (`export NAME=${NAME:-default}`
 * lines): each variable as this process has it, else ./ucompute's default.
 */
export function ucomputeEnv(): Record<string, string> {
  const text = readFileSync(join(ROOT, 'ucompute'), 'utf8');
  return Object.fromEntries(
    [...text.matchAll(/^export (\w+)=\$\{\1:-([^}]*)\}$/gm)].map(([, name, value]) => [
      name!,
      process.env[name!] ?? value!,
    ]),
  );
}

/**
 * Spawns `ucompute serve --port 0 <args>` (a free port, quiet logs, the dry backend by default). Await `serving` for its
 * address; it is apart so that a caller can track the child before the server is up.
 */
export function spawnServe(
  args: string[],
  env: NodeJS.ProcessEnv = CHILD_ENV,
  nodeArgs: readonly string[] = [],
): ChildProcess {
  // The API tests need no processes run: the dry backend, unless a test names another.
  const backend = args.includes('--backend') ? [] : ['--backend', 'dry'];
  return spawn(process.execPath, [...nodeArgs, BIN, 'serve', '--port', '0', ...backend, ...args], {
    cwd: ROOT,
    env: { ...env, UCOMPUTE_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * The newest `chars` of what the child writes (its log's warnings and errors, on stdout; stderr),
 * from now on, and how it ended if it has: what a test's failure can tell of the server's side.
 */
export function outputTail(child: ChildProcess, chars = 8000): () => string {
  let tail = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on('data', (chunk: Buffer | string) => {
      tail = (tail + chunk.toString()).slice(-chars);
    });
  }
  return () => {
    const { exitCode, signalCode } = child;
    const ended =
      exitCode === null && signalCode === null ? '' : `\n[the server exited: ${exitCode ?? signalCode}]`;
    return tail + ended;
  };
}

/** How long a start may take (2 s alone; over 90 s once at a load of 40, with a full suite running). */
const START_WITHIN_MS = 300_000;

/**
 * The URL from the child's "serving on" line. Rejects with its output if it exits first, and kills
 * it if that line has not come within `startMs` (START_WITHIN_MS by default), so that a hung start
 * fails rather than hangs the test.
 */
export function serving(child: ChildProcess, startMs = START_WITHIN_MS): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`ucompute serve did not start in time\nstdout: ${out}\nstderr: ${err}`));
    }, startMs);
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const m = /serving on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`ucompute serve exited (${code ?? signal})\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

/** A running `ucompute serve` child: its address and data folder, for `--url` and `--data-dir`. */
export interface Served {
  child: ChildProcess;
  url: string;
  dataDir: string;
}

/** Starts `ucompute serve --data-dir DIR <args>`, with `config` (YAML) as its --config when given. */
export async function startServe(
  dataDir: string,
  {
    args = [],
    config,
    env = CHILD_ENV,
    startMs,
    nodeArgs,
  }: {
    args?: string[];
    config?: string;
    env?: NodeJS.ProcessEnv;
    startMs?: number;
    /** Node's flags, on its command line (V8 refuses some in NODE_OPTIONS). */
    nodeArgs?: readonly string[];
  } = {},
): Promise<Served> {
  const all = ['--data-dir', dataDir, ...args];
  if (config !== undefined) {
    const path = join(dataDir, 'config.yml');
    writeFileSync(path, config);
    all.push('--config', path);
  }
  const child = spawnServe(all, env, nodeArgs);
  return { child, url: await serving(child, startMs), dataDir };
}

/** SIGTERM, then SIGKILL if it has not exited within a few seconds. */
export async function stopServe(served: Served | undefined): Promise<void> {
  const child = served?.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** Puts a file into the server's storage (a drive path), for jobs whose inputs are checked at submit. */
export function putFile(served: Served, path: string, content = 'b a b c b a\n'): void {
  const target = join(served.dataDir, 'storage', path);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, content);
}

/**
 * The job once the served service has moved it to `state`, asked through the CLI's own client in
 * this process: a wait is not what the CLI tests prove, and a `ucompute show` child per question
 * costs most of a CPU second.
 */
export async function servedJobInState(
  served: Served,
  id: string,
  state: JobState,
  timeout = 120_000,
): Promise<Job> {
  // The admin token `serve` wrote, whatever $UCOMPUTE_TOKEN this process has.
  const token = readFileSync(join(served.dataDir, 'admin.token'), 'utf8').trim();
  const client = await connect({ url: served.url, token });
  return until(
    async () => {
      const job = await client.get<Job>('/api/jobs/retrieve', { id });
      return job.status.state === state && job;
    },
    { describe: `job ${id} is ${state}`, timeout, every: 100 },
  );
}
