/**
 * The two sides of bench/cluster.bench.ts, each on a cluster of its own (scripts/cluster.sh): N
 * Volcano Jobs created directly with client-node, and N jobs submitted through ucompute's API. Each
 * side records when every job was submitted and when it was seen Running; `progress` says where it
 * is while it runs, and a side stopped early (`stopped` settles: --timeout-minutes, SIGINT/SIGTERM)
 * reports what it has.
 */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { CHILD_ENV } from '../test/support/cli.ts';
import { ROOT } from '../test/support/paths.ts';
import { startServe, stopServe, ucomputeEnv, ucomputeNodeFlags } from '../test/support/serve.ts';
import { followUcompute, type Reread, tellMissed } from './cluster-events.ts';
import { followObjects, PODS, VOLCANO_JOBS, volcanoJobOf } from './cluster-follow.ts';
import type { Timeline } from './cluster-timeline.ts';

export const NAMESPACE = 'ucompute';
const CONCURRENCY = 16;
const APPS = [join(ROOT, 'examples/apps'), join(ROOT, 'test/cluster/apps')];

export interface SideOptions {
  /** The `scripts/cluster.sh up` folder this side runs on. */
  cluster: string;
  jobs: number;
  spec: object;
  /** A folder of the side's own for its files. */
  work: string;
  /** Settles when the side must stop waiting: it reports what it has. */
  stopped: Promise<string>;
  /** ucompute's side: how long its N jobs stay live before its RSS is read again (ms). */
  holdMs?: number;
  /** Where the side records its jobs (the caller reads it for progress). */
  timeline: Timeline;
}

/** Runs `submit` for 0..n-1, CONCURRENCY at a time, until all are done or `stopped` settles. */
async function inParallel(n: number, stopped: Promise<string>, submit: (i: number) => Promise<void>) {
  let next = 0;
  let stop = false;
  void stopped.then(() => {
    stop = true;
  });
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n && !stop) await submit(next++);
    }),
  );
}

const kubeconfig = (cluster: string, user: 'admin' | 'ucompute') => {
  const kc = new KubeConfig();
  kc.loadFromFile(join(cluster, `${user}.kubeconfig`));
  return kc;
};

/**
 * Follows the side's Volcano Jobs and pods, telling the timeline when each job's first pod and
 * its Volcano Job are seen Running (`key`: the job's key from its Volcano Job's name); the
 * timeline fails if a follower gives up.
 */
async function followCluster(
  kc: KubeConfig,
  t: Timeline,
  key: (volcanoJob: string) => string,
  stopped: Promise<unknown>,
  volcanoRunning: (key: string) => void = (k) => t.sawVolcanoRunning(k),
): Promise<() => void> {
  const fail = (why: string) => t.fail(why);
  const jobs = await followObjects(
    kc,
    NAMESPACE,
    VOLCANO_JOBS,
    (job) => job.status?.state?.phase === 'Running' && volcanoRunning(key(job.metadata.name)),
    stopped,
    fail,
  );
  const pods = await followObjects(
    kc,
    NAMESPACE,
    PODS,
    (pod) => {
      const name = volcanoJobOf(pod);
      if (pod.status?.phase === 'Running' && name !== undefined) t.sawPodRunning(key(name));
    },
    stopped,
    fail,
  );
  return () => {
    jobs();
    pods();
  };
}

/** The same Volcano Jobs ucompute would make (`ucompute plan`), created directly with client-node. */
export async function directSide(o: SideOptions) {
  const config = join(o.work, 'plan.yml');
  await mkdir(o.work, { recursive: true });
  await writeFile(
    config,
    `kubernetes: { namespaceStrategy: single, namespace: ${NAMESPACE} }\nsecurity: { allowRootApps: true }\n`,
  );
  await writeFile(join(o.work, 'spec.json'), JSON.stringify(o.spec));
  // Not execFileSync: the other side runs in this process meanwhile.
  const { stdout } = await promisify(execFile)(process.execPath, [
    join(ROOT, 'bin/ucompute.js'),
    'plan',
    join(o.work, 'spec.json'),
    '--config',
    config,
    '--output',
    'json',
    ...APPS.flatMap((a) => ['--apps', a]),
  ]);
  const [template] = JSON.parse(stdout);
  const kc = kubeconfig(o.cluster, 'admin');
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const t = o.timeline;
  // The direct side's RUNNING is its Volcano Job's phase Running.
  const unfollow = await followCluster(
    kc,
    t,
    (name) => name,
    o.stopped,
    (name) => {
      t.sawVolcanoRunning(name);
      t.sawRunning(name);
    },
  );
  t.firstSubmit = performance.now();
  await inParallel(o.jobs, o.stopped, async (i) => {
    const job = structuredClone(template);
    job.metadata.name = `d-${i}`;
    // Not ucompute's: no managed-by label.
    job.metadata.labels = { bench: 'direct' };
    job.spec.tasks[0].template.metadata.labels = { bench: 'direct' };
    t.submitted.set(job.metadata.name, performance.now());
    await objects.create(job);
  });
  t.allSubmitted = performance.now();
  console.error(`direct: ${t.submitted.size} created in ${Math.round(t.allSubmitted - t.firstSubmit)} ms`);
  await t.untilAllRunning(o.stopped);
  unfollow();
  console.error(
    `direct: ${t.running.size} Running after ${Math.round(performance.now() - t.firstSubmit)} ms`,
  );
  return t.summary();
}

/** ucompute's requests, as the API server's audit log has them (one JSON event a line). */
async function auditLines(cluster: string): Promise<{ verb: string; objectRef?: { resource?: string } }[]> {
  const text = await readFile(join(cluster, 'logs', 'audit.log'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

/** A process's CPU time so far, user + system, in ms (/proc counts ticks of 1/100 s). */
export async function cpuMsOf(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Where a process's RSS is, from /proc/PID/smaps (MiB): file pages (the node binary, libraries),
 * V8's heap (anonymous mappings below 0x700000000000: V8 places its pages and large objects at
 * random addresses there, while the kernel hands out mmap's unhinted mappings from the top; and
 * its code ranges, the only rwx ones), malloc's main arena ([heap]) and its other arenas (anonymous rw mappings on a 64-MiB boundary
 * up there: glibc's arena heaps), and the rest (malloc's own mmaps of large blocks, thread stacks).
 */
export async function rssParts(pid: number) {
  const kb = { file: 0, v8: 0, mallocMain: 0, mallocArenas: 0, other: 0 };
  let part: keyof typeof kb = 'other';
  for (const line of (await readFile(`/proc/${pid}/smaps`, 'utf8')).split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) {
      const start = BigInt(`0x${m[1]}`);
      const size = BigInt(`0x${m[2]}`) - start;
      const name = m[4]!;
      part = name.startsWith('/')
        ? 'file'
        : name === '[heap]'
          ? 'mallocMain'
          : name !== ''
            ? 'other'
            : start < 0x700000000000n || m[3] === 'rwxp'
              ? 'v8'
              : m[3] === 'rw-p' && start % (64n << 20n) === 0n && size <= 64n << 20n
                ? 'mallocArenas'
                : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kb[part] += Number(rss[1]);
  }
  return Object.fromEntries(Object.entries(kb).map(([k, v]) => [k, Math.round(v / 1024)])) as typeof kb;
}

/** The jobs through ucompute's API (`ucompute serve --backend kubernetes`, as ./ucompute runs it). */
export async function ucomputeSide(o: SideOptions) {
  const data = join(o.work, 'ucompute');
  await mkdir(join(data, 'storage'), { recursive: true });
  const served = await startServe(data, {
    // Node's flags and environment as ./ucompute runs serve, the flags on Node's command line as
    // there (V8 refuses --heap-growing-percent in NODE_OPTIONS).
    nodeArgs: ucomputeNodeFlags(),
    env: { ...CHILD_ENV, ...ucomputeEnv() },
    args: ['--backend', 'kubernetes'],
    config: [
      `apps: [${APPS.join(', ')}]`,
      `storage: { root: ${join(data, 'storage')} }`,
      'security: { allowRootApps: true }',
      'kubernetes:',
      `  kubeconfig: ${join(o.cluster, 'ucompute.kubeconfig')}`,
      '  namespaceStrategy: single',
      `  namespace: ${NAMESPACE}`,
      // The API server, not the client, is what limits here (as for the direct side).
      '  requestsPerSecond: 1000',
      '  requestBurst: 2000',
    ].join('\n'),
  });
  try {
    return await measure(
      o,
      served.url,
      served.child.pid!,
      (await readFile(join(data, 'admin.token'), 'utf8')).trim(),
    );
  } finally {
    await stopServe(served);
  }
}

async function measure(o: SideOptions, url: string, pid: number, token: string) {
  const rssMb = async () =>
    Math.round(Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);
  /** Open sockets of ucompute's (connections to the API server, mostly; its listener, the events stream). */
  const sockets = async () =>
    (
      await Promise.all(
        (await readdir(`/proc/${pid}/fd`)).map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')),
      )
    ).filter((target) => target.startsWith('socket:')).length;
  /** What the RSS is made of, from prom-client's process metrics on /metrics (MB). */
  const heapMb = async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const mb = (name: string) =>
      Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) / 2 ** 20);
    return {
      heapUsed: mb('nodejs_heap_size_used_bytes'),
      heapTotal: mb('nodejs_heap_size_total_bytes'),
      // Outside V8's heap, in malloc's: ArrayBuffers' and Buffers' memory, and other memory V8 was told of.
      external: mb('nodejs_external_memory_bytes'),
    };
  };
  let maxRss = 0;
  let atMaxRss: object | undefined;
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
  const t = o.timeline;
  /** Jobs first seen RUNNING by a read of the list, not by an event: the stream missed them. */
  const seenByReading: { id: string; how: Reread }[] = [];
  const events = followUcompute(
    url,
    token,
    (id, how) => {
      if (how !== 'event' && t.submitted.has(id) && !t.running.has(id)) {
        seenByReading.push({ id, how });
        void tellMissed(url, token, id, how);
      }
      t.sawRunning(id);
    },
    o.stopped,
  );
  // When every Volcano Job runs but some job has not been seen RUNNING for two minutes, the events
  // missed it (or ucompute did): a read of the list says which; at most every five minutes.
  let gapSince: number | undefined;
  let askedAt = Number.NEGATIVE_INFINITY;
  const gapCheck = setInterval(() => {
    if (t.volcanoRunning.size < t.jobs || t.running.size >= t.jobs) {
      gapSince = undefined;
      return;
    }
    const now = performance.now();
    gapSince ??= now;
    if (now - gapSince < 120_000 || now - askedAt < 300_000) return;
    askedAt = now;
    console.error(
      `ucompute: every Volcano Job Running, ${t.jobs - t.running.size} jobs not seen RUNNING for 2 min: reading the list`,
    );
    void events.reread();
  }, 10_000);
  // What the cluster itself says of ucompute's jobs (Volcano Job `j-<id>`), beside ucompute's RUNNING.
  const unfollow = await followCluster(
    kubeconfig(o.cluster, 'admin'),
    t,
    (name) => name.replace(/^j-/, ''),
    o.stopped,
  );
  try {
    const rssIdle = await rssMb();
    const partsIdle = await rssParts(pid);
    const auditBefore = (await auditLines(o.cluster)).length;
    const cpuBefore = await cpuMsOf(pid);
    const busy: string[] = [];
    t.firstSubmit = performance.now();
    await inParallel(o.jobs, o.stopped, async () => {
      const at = performance.now();
      // A busy answer (429, 503: ucompute's intake is full) is tried again after it says when, a
      // few times; any other refusal stops the side, with what it said.
      for (let attempt = 1; ; attempt++) {
        const answer = await fetch(`${url}/api/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ items: [o.spec] }),
        });
        if (answer.ok) {
          const { responses } = (await answer.json()) as { responses: { id: string }[] };
          t.submitted.set(responses[0]!.id, at);
          return;
        }
        const said = `${answer.status} ${await answer.text()}`;
        if (![429, 503].includes(answer.status) || attempt === 10) throw new Error(`POST /api/jobs: ${said}`);
        busy.push(said);
        await new Promise((r) => setTimeout(r, 1000 * Number(answer.headers.get('retry-after') ?? 1)));
      }
    });
    t.allSubmitted = performance.now();
    console.error(
      `ucompute: ${t.submitted.size} submitted in ${Math.round(t.allSubmitted - t.firstSubmit)} ms` +
        (busy.length > 0 ? `; ${busy.length} busy answers tried again, the first: ${busy[0]}` : ''),
    );
    const rssAllSubmitted = await rssMb();
    await t.untilAllRunning(o.stopped);
    console.error(
      `ucompute: ${t.running.size} RUNNING after ${Math.round(performance.now() - t.firstSubmit)} ms`,
    );
    const cpu = (await cpuMsOf(pid)) - cpuBefore;
    const rssAllRunning = { rss: await rssMb(), ...(await heapMb()), parts: await rssParts(pid) };
    // Requests until the last job ran; no job has ended yet (their run time outlasts the run).
    const requests = (await auditLines(o.cluster)).slice(auditBefore);
    // The N jobs live, nothing happening to them: the steady state's RSS, and what it costs.
    const holdMs = t.endedBy === 'all running' ? (o.holdMs ?? 0) : 0;
    await Promise.race([new Promise((resolve) => setTimeout(resolve, holdMs)), o.stopped]);
    const held = {
      seconds: holdMs / 1000,
      rss: await rssMb(),
      ...(await heapMb()),
      parts: await rssParts(pid),
      cpuMs: (await cpuMsOf(pid)) - cpuBefore - cpu,
    };
    const byVerb: Record<string, number> = {};
    for (const r of requests) {
      const key = `${r.verb} ${r.objectRef?.resource ?? ''}`;
      byVerb[key] = (byVerb[key] ?? 0) + 1;
    }
    // Per job that reached RUNNING, and per Volcano Job ucompute created: the same in a full run;
    // in a stopped one the second is the cost per job on the path so far.
    const n = Math.max(1, t.running.size);
    const created = Math.max(1, byVerb['create jobs'] ?? 0);
    const notWatch = requests.filter((r) => r.verb !== 'watch').length;
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      ...t.summary(),
      volcanoJobsCreated: byVerb['create jobs'] ?? 0,
      busyAnswers: busy.length,
      apiRequestsPerJob: round(notWatch / n),
      apiRequestsPerVolcanoJobCreated: round(notWatch / created),
      requestsByVerbPerJob: Object.fromEntries(
        Object.entries(byVerb).map(([k, c]) => [k, Math.round((c / n) * 1000) / 1000]),
      ),
      cpuMsPerJob: round(cpu / n),
      cpuMsPerJobSubmitted: round(cpu / Math.max(1, t.submitted.size)),
      rssMbBeforeAnyJob: rssIdle,
      rssPartsBeforeAnyJob: partsIdle,
      rssMbAllSubmitted: rssAllSubmitted,
      allRunning: rssAllRunning,
      held,
      rssMbMax: maxRss,
      atRssMax: atMaxRss,
      socketsMax: maxSockets,
      // Included in `running` and the percentiles, at the time the list was read (later than the
      // job's RUNNING); each is logged with its updates.
      seenRunningByReading: {
        rereads: events.rereads,
        jobs: seenByReading.length,
        first: seenByReading.slice(0, 20),
      },
    };
  } finally {
    clearInterval(gapCheck);
    clearInterval(sampler);
    events.abort();
    unfollow();
  }
}
