/**
 * Kubernetes backend (issue 5) against the fake API server of the tests, run in a child process
 * so that this process's memory and CPU are the backend's alone:
 *
 * 1. Following: 10,000 active jobs (a Volcano Job, its PodGroup and one pod each) are listed at
 *    start; then the cluster side moves all of them from Pending to Running (pod, then job), and
 *    the time until the backend has reported the 10,000th RUNNING is measured, with the backend
 *    process's CPU time per state change and its RSS per followed job.
 * 2. Submissions: jobs submitted 16 at a time (the job service's concurrency), once with the
 *    default client-side rate limiter (50 requests/s, burst 100) and once with a limiter high
 *    enough that the API server is the limit; a submission is two requests (policy, job).
 *
 *   node bench/kubernetes.bench.ts [--jobs 10000] [--submissions 1000]
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { kubernetesBackend } from '../src/backends/kubernetes/kubernetes-backend.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';
import type { JobBuild } from '../src/plugins/plugin.ts';
import { type Obj, startFakeApiServer } from '../test/support/fake-kube/api-server.ts';
import { build } from '../test/support/fixtures.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    submissions: { type: 'string', default: '1000' },
    'api-server': { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const SUBMISSIONS = Number(values.submissions);
const NAMESPACE = 'ucompute-jobs';
const SPEC = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 1,
  parameters: {},
};
// The example catalogue's mpi-hello runs as root, which this operator allows.
const CONFIG = {
  kubernetes: { namespaceStrategy: 'single' as const, namespace: NAMESPACE },
  security: { allowRootApps: true },
};

/** One job's build with its own id, from a template (building 10,000 through the plugins is not the point). */
function jobBuild(template: JobBuild, id: string): JobBuild {
  const text = JSON.stringify(template).replaceAll('benchtemplate', id);
  return JSON.parse(text) as JobBuild;
}

if (values['api-server']) {
  // The child: the fake API server, driven over IPC.
  const api = await startFakeApiServer();
  api.apply('namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  const template = await build(SPEC, { id: 'benchtemplate', config: CONFIG });
  const podOf = (job: Obj, phase: string): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${job.metadata.name}-job-0`,
      namespace: NAMESPACE,
      labels: {
        ...job.spec.tasks[0].template.metadata.labels,
        'volcano.sh/job-name': job.metadata.name,
        'volcano.sh/task-index': '0',
      },
    },
    spec: job.spec.tasks[0].template.spec,
    status:
      phase === 'Running'
        ? {
            phase,
            podIP: '10.1.0.1',
            conditions: [{ type: 'Ready', status: 'True' }],
            containerStatuses: [
              {
                name: 'user-job',
                ready: true,
                restartCount: 0,
                image: 'x',
                imageID: '',
                state: { running: {} },
              },
            ],
          }
        : { phase, conditions: [{ type: 'PodScheduled', status: 'True' }] },
  });
  process.on('message', (message: { populate?: number; run?: number; stop?: boolean }) => {
    if (message.populate !== undefined) {
      for (let i = 0; i < message.populate; i++) {
        const job = jobBuild(template, `f${i}`).volcanoJob as Obj;
        job.status = { state: { phase: 'Pending' }, minAvailable: 1 };
        api.apply('jobs', job);
        api.apply('podgroups', {
          apiVersion: 'scheduling.volcano.sh/v1beta1',
          kind: 'PodGroup',
          metadata: { name: `${job.metadata.name}-pg`, namespace: NAMESPACE, labels: job.metadata.labels },
          spec: { minMember: 1 },
          status: { phase: 'Inqueue' },
        });
        api.apply('pods', podOf(job, 'Pending'));
      }
      process.send!({ populated: message.populate });
    }
    if (message.run !== undefined) {
      // In slices, as a controller would, so that the watch streams flow meanwhile.
      let i = 0;
      const slice = () => {
        for (const end = Math.min(i + 500, message.run!); i < end; i++) {
          const job = structuredClone(api.get('jobs', NAMESPACE, `j-f${i}`));
          api.apply('pods', podOf(job, 'Running'));
          job.status = { state: { phase: 'Running' }, minAvailable: 1, running: 1 };
          api.apply('jobs', job);
        }
        if (i < message.run!) setImmediate(slice);
      };
      slice();
    }
    if (message.stop) void api.close().then(() => process.exit(0));
  });
  process.send!({ url: api.url });
} else {
  await main();
}

async function main(): Promise<void> {
  const child = fork(new URL(import.meta.url).pathname, ['--api-server'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = <T>(key: string) =>
    new Promise<T>((resolve) => {
      const on = (m: Record<string, unknown>) => {
        if (key in m) {
          child.off('message', on);
          resolve(m[key] as T);
        }
      };
      child.on('message', on);
    });
  const url = await next<string>('url');
  const dir = await mkdtemp(join(os.tmpdir(), 'ucompute-bench-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters: [{name: fake, cluster: {server: "${url}", insecure-skip-tls-verify: true}}]\n` +
      'users: [{name: b, user: {token: t}}]\ncontexts: [{name: fake, context: {cluster: fake, user: b}}]\ncurrent-context: fake\n',
  );

  child.send({ populate: JOBS });
  await next('populated');
  global.gc?.();
  const before = process.memoryUsage();
  const backend = kubernetesBackend({
    config: resolvePipelineConfig(CONFIG),
    settings: { kubeconfig },
  });
  let running = 0;
  let queued = 0;
  let allRunning: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allRunning = resolve;
  });
  backend.onEvent((e) => {
    if (e.state === 'IN_QUEUE') queued++;
    if (e.state === 'RUNNING' && ++running === JOBS) allRunning();
  });
  const listStart = performance.now();
  const known = await backend.knownJobs();
  await new Promise((r) => setImmediate(r));
  const listMs = performance.now() - listStart;

  const cpuStart = process.cpuUsage();
  const start = performance.now();
  child.send({ run: JOBS });
  await done;
  const applyMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  const cpuMicros = cpu.user + cpu.system;
  const peakRss = process.resourceUsage().maxRSS * 1024;
  global.gc?.();
  const after = process.memoryUsage();

  console.log(
    `Machine: ${os.cpus().length} cores, Node ${process.version}; API server in a child process on 127.0.0.1.\n`,
  );
  console.log('Following (one list and one watch per kind; pods, PodGroups and Volcano Jobs):\n');
  console.log(
    `| jobs followed | initial list | ${JOBS.toLocaleString('en')} Pending→Running applied | CPU per state change | RSS before the backend | RSS following (peak) | RSS per job | heap per job |`,
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  console.log(
    `| ${known.size.toLocaleString('en')} (${queued.toLocaleString('en')} IN_QUEUE reported) | ${(listMs / 1000).toFixed(2)} s | ${(applyMs / 1000).toFixed(2)} s | ${(cpuMicros / JOBS).toFixed(0)} µs | ${mib(before.rss)} MiB | ${mib(after.rss)} MiB (${mib(peakRss)} MiB) | ${((after.rss - before.rss) / JOBS / 1024).toFixed(1)} KiB | ${((after.heapUsed - before.heapUsed) / JOBS / 1024).toFixed(1)} KiB |`,
  );
  await backend.close();

  console.log('\nSubmissions (16 at a time; each is a NetworkPolicy and a Volcano Job):\n');
  console.log('| rate limiter | submissions | seconds | submissions/s | API requests/s |');
  console.log('| --- | ---: | ---: | ---: | ---: |');
  const template = await build(SPEC, { id: 'benchtemplate', config: CONFIG });
  for (const [label, requestsPerSecond, burst] of [
    ['50 requests/s, burst 100 (default)', 50, 100],
    ['5,000 requests/s, burst 100', 5000, 100],
  ] as const) {
    const submitter = kubernetesBackend({
      config: resolvePipelineConfig(CONFIG),
      settings: { kubeconfig, requestsPerSecond, requestBurst: burst },
    });
    await submitter.knownJobs();
    const prefix = label.startsWith('50 ') ? 'sa' : 'sb';
    const count = label.startsWith('50 ') ? Math.min(SUBMISSIONS, 500) : SUBMISSIONS;
    const builds = Array.from({ length: count }, (_, i) => jobBuild(template, `${prefix}${i}`));
    let index = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (index < builds.length) {
          const i = index++;
          await submitter.submit(`${prefix}${i}`, builds[i]!);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    console.log(
      `| ${label} | ${count.toLocaleString('en')} | ${seconds.toFixed(2)} | ${(count / seconds).toFixed(0)} | ${((2 * count) / seconds).toFixed(0)} |`,
    );
    await submitter.close();
  }
  child.send({ stop: true });
  await rm(dir, { recursive: true, force: true });
}

function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(0);
}
