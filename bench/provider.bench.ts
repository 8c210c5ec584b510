/**
 * Provider mode under load: `ucompute serve` (dry backend, `mode: ucloud-provider`) in a child
 * process, driven by the fake UCloud Core of the tests in this process on loopback.
 *
 * - Jobs created per second through `POST /ucloud/<p>/jobs`, with Core's RS256 token on every
 *   request, in bulks of 1 (concurrency 16) and of 100 (concurrency 4), driven by wrk (a Lua
 *   script gives every job its own id, as Core does). The reference in the same run: the same
 *   server binary in standalone mode taking the same jobs through `POST /api/jobs` (there is no
 *   other UCloud provider that runs here: IM2 needs Envoy and a Core of its own).
 * - Update delivery latency to Core: from the moment ucompute applied an update (its `timestamp`)
 *   to the moment Core received it, p50/p99, for jobs created at a steady rate (one at a time,
 *   `--rate` per second), and for the backlog the bulk case leaves (how long Core waits for it).
 *
 *   node bench/provider.bench.ts [--seconds 8] [--rate 50] [--batch 500] [--calls 4]
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { fakeUcloudCore, ucloudApplication } from '../test/support/fake-ucloud-core.ts';
import { type Served, startServe, stopServe } from '../test/support/serve.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rate: { type: 'string', default: '50' },
    // The outbox delivery's settings (ucloud.batchSize, ucloud.concurrentCalls); ucompute's defaults when left out.
    batch: { type: 'string' },
    calls: { type: 'string' },
  },
});
const SECONDS = Number(values.seconds);
const RATE = Number(values.rate);
const PROVIDER = 'bench';

const TERMINAL = `
tool: v1
name: debian
version: "12"
title: Debian
authors: [bench]
container: debian:bookworm-slim
backend: DOCKER
---
application: v1
name: terminal
version: "1.0"
title: Terminal
authors: [bench]
description: Sleeps.
tool: { name: debian, version: "12" }
invocation: [sleep, infinity]
`;
const application = ucloudApplication(
  buildCatalog([{ path: 'terminal.yml', text: TERMINAL }]).catalog.find('terminal', '1.0')!,
);
const spec = {
  application: { name: 'terminal', version: '1.0' },
  timeAllocation: { hours: 1, minutes: 0, seconds: 0 },
  product: { id: 'u1-standard-1', category: 'u1-standard', provider: PROVIDER },
};
const standaloneSpec = { ...spec, product: { id: 'u1-standard-1', category: 'u1-standard' } };

const core = await fakeUcloudCore(PROVIDER);
const dir = await mkdtemp(join(tmpdir(), 'ucompute-provider-bench-'));
/** Core's Job for id `id`, as it sends it (without registering it in Core's list: nothing browses it here). */
const coreJob = (id: string) => ({
  id,
  owner: { createdBy: 'alice#1234', project: null },
  updates: [],
  specification: { replicas: 1, allowDuplicateJob: false, parameters: {}, resources: [], ...spec },
  status: { state: 'IN_QUEUE', resolvedApplication: application, resolvedProduct: null, allowRestart: false },
  createdAt: Date.now(),
  permissions: null,
});

async function serveProvider(): Promise<Served> {
  const data = join(dir, 'provider');
  await writeFile(join(dir, 'refresh-token'), core.refreshToken);
  await writeFile(join(dir, 'ucloud_key.pub'), core.publicKeyForProvider);
  await mkdir(data, { recursive: true });
  return startServe(data, {
    config: [
      'mode: ucloud-provider',
      'ucloud:',
      `  providerId: ${PROVIDER}`,
      `  coreUrl: ${core.url}`,
      `  refreshTokenFile: ${join(dir, 'refresh-token')}`,
      `  corePublicKeyFile: ${join(dir, 'ucloud_key.pub')}`,
      '  publicUrl: http://127.0.0.1',
      ...(values.batch !== undefined ? [`  batchSize: ${values.batch}`] : []),
      ...(values.calls !== undefined ? [`  concurrentCalls: ${values.calls}`] : []),
      '',
    ].join('\n'),
  });
}

/**
 * wrk posting `items` jobs per request over `concurrency` connections for SECONDS; its Lua script
 * numbers the jobs `<prefix><n>`, so that every job is new. `job(id)` is one item's JSON.
 */
async function wrkLoad(
  url: string,
  token: string,
  o: { concurrency: number; items: number; prefix: string; job: (id: string) => unknown },
) {
  const [head, tail = ''] = JSON.stringify(o.job('@ID@')).split('@ID@');
  const numbered = tail !== '';
  const script = join(dir, `${o.prefix}.lua`);
  await writeFile(
    script,
    [
      'wrk.method = "POST"',
      'wrk.headers["Content-Type"] = "application/json"',
      `wrk.headers["Authorization"] = "Bearer ${token}"`,
      'local n = 0',
      `local head, tail = [==[${head}]==], [==[${tail}]==]`,
      'request = function()',
      '  local items = {}',
      `  for i = 1, ${o.items} do`,
      '    n = n + 1',
      numbered ? `    items[i] = head .. "${o.prefix}" .. n .. tail` : '    items[i] = head',
      '  end',
      '  return wrk.format(nil, nil, nil, \'{"items":[\' .. table.concat(items, ",") .. "]}")',
      'end',
      '',
    ].join('\n'),
  );
  const out = execFileSync(
    'wrk',
    ['-t1', `-c${o.concurrency}`, `-d${SECONDS}s`, '--latency', '-s', script, url],
    { encoding: 'utf8' },
  );
  const ms = (label: string) => {
    const m = new RegExp(`${label}\\s+([\\d.]+)(us|ms|s)`).exec(out);
    return m ? Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1) : Number.NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const failures = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const seconds = Number(/requests in ([\d.]+)s/.exec(out)?.[1] ?? SECONDS);
  return {
    requests,
    jobs: (requests - failures) * o.items,
    seconds,
    p50: ms('50%'),
    p99: ms('99%'),
    failures,
  };
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

/** Every update Core received for jobs whose id starts with `prefix`: latencies, and whether all ended. */
function delivered(prefix: string) {
  const latencies: number[] = [];
  const ended = new Set<string>();
  let last = 0;
  let lastWritten = 0;
  for (const u of core.state.updates) {
    if (!u.id.startsWith(prefix)) continue;
    latencies.push(u.receivedAt - Number(u.update.timestamp));
    if (u.update.state === 'SUCCESS') ended.add(u.id);
    last = Math.max(last, u.receivedAt);
    lastWritten = Math.max(lastWritten, Number(u.update.timestamp));
  }
  return { latencies: latencies.sort((a, b) => a - b), ended: ended.size, last, lastWritten };
}

/** Waits (bounded: 600 s) until Core heard that `count` jobs of `prefix` ended. */
async function untilEnded(prefix: string, count: number): Promise<boolean> {
  for (let i = 0; i < 6000; i++) {
    if (delivered(prefix).ended >= count) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
const loadAtStart = load();
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
let provider: Served | undefined;
let standalone: Served | undefined;
try {
  provider = await serveProvider();
  const jobsUrl = `${provider.url}/ucloud/${PROVIDER}/jobs`;
  const token = await core.token();

  // Steady: one job per request at RATE per second; latency of every update of theirs.
  const steadyJobs = Math.round(RATE * SECONDS);
  const steadyStart = performance.now();
  for (let i = 0; i < steadyJobs; i++) {
    const due = steadyStart + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const answer = await fetch(jobsUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [coreJob(`st${i}`)] }),
    });
    if (answer.status !== 200)
      throw new Error(`steady create answered ${answer.status}: ${await answer.text()}`);
  }
  const steadyAllEnded = await untilEnded('st', steadyJobs);
  const steady = delivered('st');

  // Throughput, bulk of 1 and of 100; then how long Core waits for the backlog.
  const single = await wrkLoad(jobsUrl, token, { concurrency: 16, items: 1, prefix: 'sa', job: coreJob });
  const bulk = await wrkLoad(jobsUrl, token, { concurrency: 4, items: 100, prefix: 'bb', job: coreJob });
  const bulkEndedAt = Date.now();
  const bulkAllEnded = await untilEnded('bb', bulk.jobs);
  const backlog = delivered('bb');
  await stopServe(provider);

  // The reference: the same jobs through the standalone API of the same server binary.
  await mkdir(join(dir, 'standalone'), { recursive: true });
  standalone = await startServe(join(dir, 'standalone'), {
    config: 'accounting:\n  initialCredits: 100000000\n',
  });
  const adminToken = (await readFile(join(dir, 'standalone', 'admin.token'), 'utf8')).trim();
  const apiUrl = `${standalone.url}/api/jobs`;
  const refSingle = await wrkLoad(apiUrl, adminToken, {
    concurrency: 16,
    items: 1,
    prefix: 'ra',
    job: () => standaloneSpec,
  });
  const refBulk = await wrkLoad(apiUrl, adminToken, {
    concurrency: 4,
    items: 100,
    prefix: 'rb',
    job: () => standaloneSpec,
  });

  const rate = (r: { jobs: number; seconds: number }) => r.jobs / r.seconds;
  const failures = single.failures + bulk.failures + refSingle.failures + refBulk.failures;
  if (failures > 0 || !steadyAllEnded || !bulkAllEnded) process.exitCode = 1;
  console.log(
    `commit ${commit}, Node ${process.version}, dry backend, ${SECONDS} s per case, delivery batch ${values.batch ?? 'default'} × ${values.calls ?? 'default'} calls, server, wrk and the fake Core on one machine; load average ${loadAtStart} at the start, ${load()} at the end\n`,
  );
  console.log('| case | requests | non-200 | jobs/s | request p50 ms | request p99 ms | × standalone |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  const row = (name: string, r: typeof single, ref?: typeof single) =>
    console.log(
      `| ${name} | ${r.requests} | ${r.failures} | ${Math.round(rate(r))} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${ref ? (rate(r) / rate(ref)).toFixed(2) : ''} |`,
    );
  row('provider: POST /ucloud/<p>/jobs, bulk of 1, concurrency 16', single, refSingle);
  row('provider: bulk of 100, concurrency 4', bulk, refBulk);
  row('standalone: POST /api/jobs, bulk of 1, concurrency 16', refSingle);
  row('standalone: bulk of 100, concurrency 4', refBulk);
  console.log('\n| update delivery to Core | jobs | updates | p50 ms | p99 ms | max ms |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  console.log(
    `| steady: ${RATE} jobs/s, one per request | ${steadyJobs} | ${steady.latencies.length} | ${quantile(steady.latencies, 0.5)} | ${quantile(steady.latencies, 0.99)} | ${steady.latencies.at(-1)} |`,
  );
  console.log(
    `| backlog of the bulk case | ${bulk.jobs} | ${backlog.latencies.length} | ${quantile(backlog.latencies, 0.5)} | ${quantile(backlog.latencies, 0.99)} | ${backlog.latencies.at(-1)} |`,
  );
  console.log(
    `\nThe bulk case's backlog reached Core ${((backlog.last - bulkEndedAt) / 1000).toFixed(1)} s after its last request (${Math.round(backlog.latencies.length / Math.max((backlog.last - bulkEndedAt) / 1000 + SECONDS, 0.001))} updates/s delivered over the case and its drain); ucompute wrote its last update ${((backlog.lastWritten - bulkEndedAt) / 1000).toFixed(1)} s after the last request (the jobs' own run and end, on the dry backend).`,
  );
} finally {
  await stopServe(provider);
  await stopServe(standalone);
  await core.close();
  await rm(dir, { recursive: true, force: true });
}
