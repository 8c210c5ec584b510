/**
 * The Kubernetes backend on the real cluster of scripts/cluster.sh (issue 17): N one-replica jobs
 * submitted through ucompute's API, against the same N Volcano Jobs (the manifest `ucompute plan`
 * prints for that job) created directly with client-node, in the same run and on the same cluster.
 * Jobs are test/cluster/apps' sim-batch: KWOK runs each for --run-time (by default longer than the
 * run), so all N are live at once when the last one runs: the API requests counted are those on the
 * path to Running only (no job has ended, so none is being cleaned up), and the RSS is ucompute's
 * with N live jobs. Hence N one-CPU jobs must fit on the nodes (--nodes × --node-cpu ≥ --jobs).
 *
 * Reported per side: submit → RUNNING p50/p99 (RUNNING: the Volcano Job's phase for the direct
 * side, ucompute's job state for ucompute's), jobs RUNNING per second; for ucompute also its API
 * requests per job (from the API server's audit log of its ServiceAccount, watches apart, by verb),
 * its CPU ms per job and its largest RSS while the N jobs were live.
 *
 *   node bench/cluster.bench.ts [--jobs 10000] [--nodes 100] [--node-cpu 128] [--run-time 3h]
 *                               [--cluster DIR]   (an `up` cluster to use instead of a new one)
 *                               [--timeout-minutes 120]   (per side, until all N are RUNNING)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';
import { CHILD_ENV } from '../test/support/cli.ts';
import { ROOT } from '../test/support/fixtures.ts';
import { startServe, stopServe } from '../test/support/serve.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    nodes: { type: 'string', default: '100' },
    'node-cpu': { type: 'string', default: '128' },
    'run-time': { type: 'string', default: '3h' },
    'timeout-minutes': { type: 'string', default: '120' },
    cluster: { type: 'string' },
  },
});
const JOBS = Number(values.jobs);
if (JOBS > Number(values.nodes) * Number(values['node-cpu']))
  throw new Error(
    `--jobs ${JOBS} one-CPU jobs do not fit on --nodes × --node-cpu CPUs: all must run at once`,
  );
const CONCURRENCY = 16;
const TIMEOUT_MS = Number(values['timeout-minutes']) * 60_000;

/** Waits for `all`, or fails after --timeout-minutes saying how many of the N ran. */
async function untilAllRunning(side: string, all: Promise<void>, running: () => number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`${side}: ${running()} of ${JOBS} RUNNING after ${values['timeout-minutes']} min`)),
      TIMEOUT_MS,
    );
  });
  try {
    await Promise.race([all, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
const NAMESPACE = 'ucompute';
const apps = `[${join(ROOT, 'examples/apps')}, ${join(ROOT, 'test/cluster/apps')}]`;
const SPEC = {
  application: { name: 'sim-batch', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters: { runTime: { type: 'text', value: values['run-time'] } },
};

const work = await mkdtemp(join(os.tmpdir(), 'ucompute-cluster-bench-'));
const cluster = values.cluster ?? join(work, 'cluster');
const script = join(ROOT, 'scripts/cluster.sh');
if (!values.cluster) {
  const up = spawnSync(
    script,
    ['up', cluster, '--nodes', values.nodes!, '--node-cpu', values['node-cpu']!, '--node-memory', '512Gi'],
    {
      stdio: 'inherit',
    },
  );
  if (up.status !== 0) throw new Error('scripts/cluster.sh up failed');
}
const kc = new KubeConfig();
kc.loadFromFile(join(cluster, 'admin.kubeconfig'));
const objects = KubernetesObjectApi.makeApiClient(kc);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
const summary = (latencies: number[], firstSubmit: number, lastRunning: number) => {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    running: sorted.length,
    p50Ms: Math.round(percentile(sorted, 50)),
    p99Ms: Math.round(percentile(sorted, 99)),
    runningPerSecond: Math.round((sorted.length / ((lastRunning - firstSubmit) / 1000)) * 10) / 10,
  };
};

/** Runs `submit` for 0..n-1, CONCURRENCY at a time. */
async function inParallel(n: number, submit: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) await submit(next++);
    }),
  );
}

// ---- direct: the same Volcano Jobs, created with client-node ---------------------------------
async function direct() {
  const config = join(work, 'plan.yml');
  await writeFile(
    config,
    `kubernetes: { namespaceStrategy: single, namespace: ${NAMESPACE} }\nsecurity: { allowRootApps: true }\n`,
  );
  await writeFile(join(work, 'spec.json'), JSON.stringify(SPEC));
  const planned = JSON.parse(
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'bin/ucompute.js'),
        'plan',
        join(work, 'spec.json'),
        '--config',
        config,
        '--output',
        'json',
        '--apps',
        join(ROOT, 'examples/apps'),
        '--apps',
        join(ROOT, 'test/cluster/apps'),
      ],
      { encoding: 'utf8' },
    ),
  );
  const template = planned[0];
  const submitted = new Map<string, number>();
  const latencies: number[] = [];
  let lastRunning = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((resolve) => {
    resolveAll = resolve;
  });
  const seen = new Set<string>();
  const watch = await new Watch(kc).watch(
    `/apis/batch.volcano.sh/v1alpha1/namespaces/${NAMESPACE}/jobs`,
    { labelSelector: 'bench=direct' },
    (_type, object) => {
      const name = object.metadata.name;
      if (object.status?.state?.phase !== 'Running' || seen.has(name) || !submitted.has(name)) return;
      seen.add(name);
      lastRunning = performance.now();
      latencies.push(lastRunning - submitted.get(name)!);
      if (seen.size === JOBS) resolveAll();
    },
    () => {},
  );
  const firstSubmit = performance.now();
  await inParallel(JOBS, async (i) => {
    const job = structuredClone(template);
    job.metadata.name = `d-${i}`;
    // Not ucompute's: no managed-by label, so a ucompute started later never sees them.
    job.metadata.labels = { bench: 'direct' };
    job.spec.tasks[0].template.metadata.labels = { bench: 'direct' };
    submitted.set(job.metadata.name, performance.now());
    await objects.create(job);
  });
  console.error(`direct: ${JOBS} created in ${Math.round(performance.now() - firstSubmit)} ms`);
  await untilAllRunning('direct', all, () => seen.size);
  console.error(`direct: all Running after ${Math.round(performance.now() - firstSubmit)} ms`);
  watch.abort();
  await deleteJobs('bench=direct');
  return summary(latencies, firstSubmit, lastRunning);
}

const binDir = async () => (await readFile(join(cluster, 'run', 'bin'), 'utf8')).trim();

/** Deletes the Volcano Jobs with these labels, and waits until they (and so their pods) are gone. */
async function deleteJobs(selector: string): Promise<void> {
  const started = performance.now();
  execFileSync(
    join(await binDir(), 'kubectl'),
    [
      `--kubeconfig=${join(cluster, 'admin.kubeconfig')}`,
      '-n',
      NAMESPACE,
      'delete',
      'jobs.batch.volcano.sh',
      '-l',
      selector,
      '--wait=true',
      '--timeout=30m',
    ],
    { stdio: 'ignore' },
  );
  console.error(`${selector}: deleted in ${Math.round(performance.now() - started)} ms`);
}

// ---- through ucompute ---------------------------------------------------------------------------
async function throughUcompute() {
  const data = join(work, 'ucompute');
  await mkdir(join(data, 'storage'), { recursive: true });
  const served = await startServe(data, {
    // Node's flags as ./ucompute and deploy/Dockerfile run serve.
    env: { ...CHILD_ENV, NODE_OPTIONS: `${CHILD_ENV.NODE_OPTIONS ?? ''} --max-semi-space-size=4`.trim() },
    args: ['--backend', 'kubernetes'],
    config: [
      `apps: ${apps}`,
      `storage: { root: ${join(data, 'storage')} }`,
      'security: { allowRootApps: true }',
      'kubernetes:',
      `  kubeconfig: ${join(cluster, 'ucompute.kubeconfig')}`,
      '  namespaceStrategy: single',
      `  namespace: ${NAMESPACE}`,
      // The API server, not the client, is what limits here (as for the direct side).
      '  requestsPerSecond: 1000',
      '  requestBurst: 2000',
    ].join('\n'),
  });
  const pid = served.child.pid!;
  const token = (await readFile(join(data, 'admin.token'), 'utf8')).trim();
  const cpuMs = async () => {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  };
  const rssMb = async () =>
    Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  /** Open sockets of ucompute's (connections to the API server, mostly; its listener, the events stream). */
  const sockets = async () =>
    (
      await Promise.all(
        (await readdir(`/proc/${pid}/fd`)).map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')),
      )
    ).filter((target) => target.startsWith('socket:')).length;
  /** What the RSS is made of, from prom-client's process metrics on /metrics (MB). */
  const heapMb = async () => {
    const text = await (await fetch(`${served.url}/metrics`)).text();
    const mb = (name: string) =>
      Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) / 2 ** 20);
    return {
      heapUsed: mb('nodejs_heap_size_used_bytes'),
      heapTotal: mb('nodejs_heap_size_total_bytes'),
      external: mb('nodejs_external_memory_bytes'),
    };
  };
  const submitted = new Map<string, number>();
  const latencies: number[] = [];
  let lastRunning = 0;
  let maxRss = 0;
  let atMaxRss: { sockets: number; heapUsed: number; heapTotal: number; external: number } | undefined;
  let maxSockets = 0;
  const sampler = setInterval(() => {
    Promise.all([rssMb(), sockets(), heapMb()]).then(
      ([r, open, heap]) => {
        maxSockets = Math.max(maxSockets, open);
        if (r < maxRss) return;
        maxRss = r;
        atMaxRss = { sockets: open, ...heap };
      },
      () => {},
    );
  }, 1000);
  const events = new AbortController();
  const running = new Set<string>();
  let resolveAll!: () => void;
  const all = new Promise<void>((resolve) => {
    resolveAll = resolve;
  });
  const stream = await fetch(`${served.url}/api/jobs/events`, {
    headers: { authorization: `Bearer ${token}` },
    signal: events.signal,
  });
  (async () => {
    let buffer = '';
    for await (const chunk of stream.body!.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      let end = buffer.indexOf('\n\n');
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!/^event: job$/m.test(block) || !data) continue;
        const job = JSON.parse(data) as { id: string; status: { state: string } };
        if (job.status.state !== 'RUNNING' || running.has(job.id) || !submitted.has(job.id)) continue;
        running.add(job.id);
        lastRunning = performance.now();
        latencies.push(lastRunning - submitted.get(job.id)!);
        if (running.size === JOBS) resolveAll();
      }
    }
  })().catch(() => {});
  const rssIdle = await rssMb();
  const auditBefore = await auditLines();
  const cpuBefore = await cpuMs();
  const firstSubmit = performance.now();
  await inParallel(JOBS, async () => {
    const at = performance.now();
    const answer = await fetch(`${served.url}/api/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [SPEC] }),
    });
    const { responses } = (await answer.json()) as { responses: { id: string }[] };
    submitted.set(responses[0]!.id, at);
  });
  console.error(`ucompute: ${JOBS} submitted in ${Math.round(performance.now() - firstSubmit)} ms`);
  const rssAllSubmitted = await rssMb();
  await untilAllRunning('ucompute', all, () => running.size);
  console.error(`ucompute: all RUNNING after ${Math.round(performance.now() - firstSubmit)} ms`);
  const cpu = (await cpuMs()) - cpuBefore;
  const rssAllRunning = await rssMb();
  // Requests until the last job ran; no job has ended yet (their run time outlasts the run).
  const requests = (await auditLines()).slice(auditBefore.length);
  clearInterval(sampler);
  events.abort();
  await stopServe(served);
  // On a cluster of the caller's, its jobs would run on: ucompute is stopped, so they go directly.
  if (values.cluster) await deleteJobs('app.kubernetes.io/managed-by=ucompute');
  const byVerb: Record<string, number> = {};
  for (const r of requests)
    byVerb[`${r.verb} ${r.objectRef?.resource ?? ''}`] =
      (byVerb[`${r.verb} ${r.objectRef?.resource ?? ''}`] ?? 0) + 1;
  const notWatch = requests.filter((r) => r.verb !== 'watch');
  return {
    ...summary(latencies, firstSubmit, lastRunning),
    apiRequestsPerJob: Math.round((notWatch.length / JOBS) * 100) / 100,
    requestsByVerb: Object.fromEntries(
      Object.entries(byVerb).map(([k, n]) => [k, Math.round((n / JOBS) * 1000) / 1000]),
    ),
    cpuMsPerJob: Math.round((cpu / JOBS) * 100) / 100,
    rssMbBeforeAnyJob: Math.round(rssIdle),
    rssMbAllSubmitted: Math.round(rssAllSubmitted),
    rssMbAllRunning: Math.round(rssAllRunning),
    rssMbMax: Math.round(maxRss),
    atRssMax: atMaxRss,
    socketsMax: maxSockets,
  };
}

/** ucompute's requests, as the API server's audit log has them (one JSON event a line). */
async function auditLines(): Promise<{ verb: string; objectRef?: { resource?: string } }[]> {
  const text = await readFile(join(cluster, 'logs', 'audit.log'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

try {
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const directResult = await direct();
  console.error('direct:', JSON.stringify(directResult));
  const ucomputeResult = await throughUcompute();
  console.error('ucompute:', JSON.stringify(ucomputeResult));
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim();
  console.log(
    JSON.stringify(
      {
        commit,
        jobs: JOBS,
        nodes: `${values.nodes} x ${values['node-cpu']} CPU`,
        runTime: values['run-time'],
        loadAverageAtStart: load,
        loadAverageAtEnd: os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' '),
        direct: directResult,
        ucompute: ucomputeResult,
        p50Ratio: Math.round((ucomputeResult.p50Ms / directResult.p50Ms) * 100) / 100,
        p99Ratio: Math.round((ucomputeResult.p99Ms / directResult.p99Ms) * 100) / 100,
      },
      null,
      2,
    ),
  );
} finally {
  if (!values.cluster) spawnSync(script, ['down', cluster], { stdio: 'inherit' });
  await rm(work, { recursive: true, force: true });
}
