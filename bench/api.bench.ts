/**
 * Job submission through the HTTP API on the dry backend: accepted jobs per second and latency
 * of single-item requests at concurrency 16, bulk requests of 100, and what 100,000 stored jobs
 * cost in memory and on disk. Runs the real `ucompute serve` in a child process on loopback.
 * The timed cases are driven by wrk (Debian package `wrk`) when it is installed, since a load
 * generator in Node takes much of a core from the server on a 2-core machine; without wrk they
 * fall back to Node's http client, and say so.
 *
 *   node bench/api.bench.ts [--seconds 10] [--stored 100000]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '10' }, stored: { type: 'string', default: '100000' } },
});
const SECONDS = Number(values.seconds);
/** Jobs stored (filled up with bulk requests after the timed cases) before memory is measured. */
const STORED_TARGET = Number(values.stored);
/** Slurm's documented sustained submission rate, the field's usual yardstick (jobs/s). */
const SLURM_JOBS_PER_SECOND = 500;

const spec = {
  application: { name: 'word-count', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: { input: { type: 'file', path: '/home/local/books/moby-dick.txt', readOnly: true } },
};

async function startServer(dataDir: string): Promise<{ child: ChildProcess; port: number; token: string }> {
  await writeFile(join(dataDir, 'config.yml'), 'accounting:\n  initialCredits: 100000000\n');
  // Inputs must exist at submit.
  const input = join(dataDir, 'storage', spec.parameters.input.path);
  await mkdir(dirname(input), { recursive: true });
  await writeFile(input, 'Call me Ishmael.\n');
  const child = spawn(
    process.execPath,
    [
      'bin/ucompute.js',
      'serve',
      '--backend',
      'dry',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--config',
      join(dataDir, 'config.yml'),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, UCOMPUTE_LOG_LEVEL: 'warn' } },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /serving on http:\/\/[^:]+:(\d+) \(backend (\w+)/.exec(out);
      if (!m) return;
      // The numbers are the API's alone only on the dry backend: a default that changes (as the
      // local one became, running every job for real) must stop the benchmark, not skew it.
      if (m[2] === 'dry') resolve(Number(m[1]));
      else {
        child.kill('SIGKILL');
        reject(new Error(`serve runs the ${m[2]} backend, not dry: the benchmark would measure it`));
      }
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)));
  });
  const token = (await readFile(join(dataDir, 'admin.token'), 'utf8')).trim();
  return { child, port, token };
}

function post(agent: Agent, port: number, token: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/jobs',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface Result {
  requests: number;
  jobs: number;
  seconds: number;
  latenciesMs: number[];
  failures: number;
}

/** `concurrency` loops posting `itemsPerRequest` jobs until `seconds` pass or `maxJobs` are sent. */
async function load(
  port: number,
  token: string,
  concurrency: number,
  itemsPerRequest: number,
  seconds: number,
  maxJobs: number,
): Promise<Result> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const body = JSON.stringify({ items: Array.from({ length: itemsPerRequest }, () => spec) });
  const latenciesMs: number[] = [];
  let failures = 0;
  let sent = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline && sent + itemsPerRequest <= maxJobs) {
        sent += itemsPerRequest;
        const t = performance.now();
        const status = await post(agent, port, token, body);
        latenciesMs.push(performance.now() - t);
        if (status !== 200) failures++;
      }
    }),
  );
  agent.destroy();
  const elapsed = (performance.now() - started) / 1000;
  return {
    requests: latenciesMs.length,
    jobs: latenciesMs.length * itemsPerRequest,
    seconds: elapsed,
    latenciesMs,
    failures,
  };
}

function hasWrk(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    return (e as { status?: number }).status !== undefined; // wrk --version exits 1, but it ran
  }
}

/** The same load with wrk: one thread, `concurrency` connections, latency percentiles. */
async function wrkLoad(
  port: number,
  token: string,
  concurrency: number,
  itemsPerRequest: number,
  seconds: number,
): Promise<{ requests: number; jobs: number; seconds: number; p50: number; p99: number; failures: number }> {
  const script = join(dataDir, `post-${itemsPerRequest}.lua`);
  const body = JSON.stringify({ items: Array.from({ length: itemsPerRequest }, () => spec) });
  await writeFile(
    script,
    `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n` +
      `wrk.headers["Authorization"] = "Bearer ${token}"\nwrk.body = [[${body}]]\n`,
  );
  const out = execFileSync(
    'wrk',
    [
      '-t1',
      `-c${concurrency}`,
      `-d${seconds}s`,
      '--latency',
      '-s',
      script,
      `http://127.0.0.1:${port}/api/jobs`,
    ],
    { encoding: 'utf8' },
  );
  const ms = (label: string) => {
    const m = new RegExp(`${label}\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (!m) return Number.NaN;
    return Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1);
  };
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const elapsed = Number(/requests in ([\d.]+)s/.exec(out)?.[1] ?? seconds);
  const failures = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  return {
    requests,
    jobs: requests * itemsPerRequest,
    seconds: elapsed,
    p50: ms('50%'),
    p99: ms('99%'),
    failures,
  };
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

interface Measured {
  requests: number;
  jobs: number;
  seconds: number;
  p50: number;
  p99: number;
  failures: number;
}

function measured(r: Result): Measured {
  const sorted = [...r.latenciesMs].sort((a, b) => a - b);
  return { ...r, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

function row(name: string, r: Measured, serverCpuMs: number): string {
  const rate = r.jobs / r.seconds;
  return `| ${name} | ${r.requests} | ${r.jobs} | ${r.failures} | ${Math.round(rate)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${(serverCpuMs / r.jobs).toFixed(3)} | ${(rate / SLURM_JOBS_PER_SECOND).toFixed(1)} |`;
}

/** Waits (at most 3,000 polls) until no job is queued or running; answers how long that took. */
async function drain(port: number): Promise<{ seconds: number; finished: boolean }> {
  const started = performance.now();
  let finished = false;
  for (let i = 0; i < 3000 && !finished; i++) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const active = [...text.matchAll(/^ucompute_jobs\{state="(IN_QUEUE|RUNNING)"\} (\d+)/gm)].reduce(
      (sum, m) => sum + Number(m[2]),
      0,
    );
    finished = active === 0;
    if (!finished) await new Promise((r) => setTimeout(r, 100));
  }
  return { seconds: (performance.now() - started) / 1000, finished };
}

/** CPU time the process has used so far (user and system, all its threads), in milliseconds. */
async function cpuMs(pid: number): Promise<number> {
  // Fields 14 and 15 of /proc/PID/stat, after the command name in parentheses, in clock ticks.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-bench-'));
const { child, port, token } = await startServer(dataDir);
try {
  await load(port, token, 16, 1, 1, 2000); // warm up
  const wrk = hasWrk();
  // The server's CPU time per accepted job holds still on a loaded machine, where jobs/s does not;
  // it includes the dry backend running the jobs accepted meanwhile.
  const cpuBefore = await cpuMs(child.pid!);
  const single = wrk
    ? await wrkLoad(port, token, 16, 1, SECONDS)
    : measured(await load(port, token, 16, 1, SECONDS, Number.POSITIVE_INFINITY));
  const cpuSingle = (await cpuMs(child.pid!)) - cpuBefore;
  const bulk = wrk
    ? await wrkLoad(port, token, 4, 100, SECONDS)
    : measured(await load(port, token, 4, 100, SECONDS, Number.POSITIVE_INFINITY));
  const cpuBulk = (await cpuMs(child.pid!)) - cpuBefore - cpuSingle;
  const rssBefore = await rssKiB(child.pid!);
  // Fill up to 100,000 stored jobs with bulk requests, then let the dry backend finish them all.
  const stored = 2000 + single.jobs + bulk.jobs;
  if (stored < STORED_TARGET) await load(port, token, 4, 100, 600, STORED_TARGET - stored);
  const drained = await drain(port);
  const cpuTotal = (await cpuMs(child.pid!)) - cpuBefore;
  const rssAfter = await rssKiB(child.pid!);
  const total = Math.max(stored, STORED_TARGET);
  const db = (await stat(join(dataDir, 'ucompute.db'))).size;
  const wal = await stat(join(dataDir, 'ucompute.db-wal')).then(
    (s) => s.size,
    () => 0,
  );

  console.log(
    `Node ${process.version}, ${SECONDS} s per case, dry backend, server and load on one 2-core machine\n`,
  );
  // Refused requests are no throughput: a benchmark whose requests fail measures nothing.
  if (!drained.finished || single.failures > 0 || bulk.failures > 0) process.exitCode = 1;
  console.log(
    '| case | requests | jobs | non-200 | jobs/s | p50 ms | p99 ms | server CPU ms/job | × Slurm (500 jobs/s) |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  console.log(row('single item, concurrency 16', single, cpuSingle));
  console.log(row('bulk of 100, concurrency 4', bulk, cpuBulk));
  console.log(
    `\nStored jobs: ${total}, ${drained.finished ? 'all' : 'NOT all'} finished ${drained.seconds.toFixed(1)} s after the last was accepted. ` +
      `Database ${(db / 1048576).toFixed(1)} MiB + write-ahead log ${(wal / 1048576).toFixed(1)} MiB ` +
      `(${Math.round(db / total)} bytes per job in the database: specification, 4 updates, build, one charge). ` +
      `Server RSS ${(rssBefore / 1024).toFixed(0)} MiB after the timed cases, ` +
      `${(rssAfter / 1024).toFixed(0)} MiB with ${total} jobs stored and finished. ` +
      `Server CPU from the first timed request until all were finished: ${(cpuTotal / (total - 2000)).toFixed(3)} ms per job.`,
  );
} finally {
  child.kill('SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
}
