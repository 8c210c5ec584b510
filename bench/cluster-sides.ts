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
import { ROOT } from '../test/support/fixtures.ts';
import { startServe, stopServe } from '../test/support/serve.ts';
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
 * Follows ucompute's /api/jobs/events, telling `running` each job seen RUNNING; reconnects with
 * Last-Event-ID if the stream ends, until `stopped` settles.
 */
function followUcompute(
  url: string,
  token: string,
  running: (id: string) => void,
  stopped: Promise<unknown>,
) {
  const events = new AbortController();
  void stopped.then(() => events.abort());
  let lastEventId: string | undefined;
  const follow = async () => {
    const stream = await fetch(`${url}/api/jobs/events`, {
      headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      signal: events.signal,
    });
    let buffer = '';
    for await (const chunk of stream.body!.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        lastEventId = /^id: (.*)$/m.exec(block)?.[1] ?? lastEventId;
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!/^event: job$/m.test(block) || !data) continue;
        const job = JSON.parse(data) as { id: string; status: { state: string } };
        if (job.status.state === 'RUNNING') running(job.id);
      }
    }
  };
  const again = async (): Promise<void> => {
    while (!events.signal.aborted) {
      await follow().catch((e: unknown) => {
        if (!events.signal.aborted) console.error('ucompute: following the events again:', e);
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  void again();
  return events;
}

/** The jobs through ucompute's API (`ucompute serve --backend kubernetes`, as ./ucompute runs it). */
export async function ucomputeSide(o: SideOptions) {
  const data = join(o.work, 'ucompute');
  await mkdir(join(data, 'storage'), { recursive: true });
  const served = await startServe(data, {
    // Node's flags as ./ucompute and deploy/Dockerfile run serve.
    env: { ...CHILD_ENV, NODE_OPTIONS: `${CHILD_ENV.NODE_OPTIONS ?? ''} --max-semi-space-size=4`.trim() },
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
    return { heapUsed: mb('nodejs_heap_size_used_bytes'), heapTotal: mb('nodejs_heap_size_total_bytes') };
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
  const events = followUcompute(url, token, (id) => t.sawRunning(id), o.stopped);
  // What the cluster itself says of ucompute's jobs (Volcano Job `j-<id>`), beside ucompute's RUNNING.
  const unfollow = await followCluster(
    kubeconfig(o.cluster, 'admin'),
    t,
    (name) => name.replace(/^j-/, ''),
    o.stopped,
  );
  try {
    const rssIdle = await rssMb();
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
    const rssAllRunning = { rss: await rssMb(), ...(await heapMb()) };
    // Requests until the last job ran; no job has ended yet (their run time outlasts the run).
    const requests = (await auditLines(o.cluster)).slice(auditBefore);
    // The N jobs live, nothing happening to them: the steady state's RSS, and what it costs.
    const holdMs = t.endedBy === 'all running' ? (o.holdMs ?? 0) : 0;
    await Promise.race([new Promise((resolve) => setTimeout(resolve, holdMs)), o.stopped]);
    const held = {
      seconds: holdMs / 1000,
      rss: await rssMb(),
      ...(await heapMb()),
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
      rssMbAllSubmitted: rssAllSubmitted,
      allRunning: rssAllRunning,
      held,
      rssMbMax: maxRss,
      atRssMax: atMaxRss,
      socketsMax: maxSockets,
    };
  } finally {
    clearInterval(sampler);
    events.abort();
    unfollow();
  }
}
