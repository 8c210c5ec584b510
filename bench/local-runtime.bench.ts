/**
 * Local runtime latency and throughput (issue 4): how long createPod + start take until a trivial
 * `true` container runs, and how many such pods per second go through their whole life (create,
 * start, exit, destroy), with a network namespace per pod and on the host network (loopback mode).
 * Needs root and bubblewrap; uses its own bridge and state folder and removes them.
 *
 *   node bench/local-runtime.bench.ts --pods 200 [--concurrency 8]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRuntime, type LocalRuntimeOptions } from '../src/backends/local/create-runtime.ts';
import { removeBridgeNetwork } from '../src/backends/local/network.ts';
import type { Runtime } from '../src/backends/local/runtime.ts';

const { values } = parseArgs({
  options: { pods: { type: 'string', default: '200' }, concurrency: { type: 'string', default: '8' } },
});
const PODS = Number(values.pods);
const CONCURRENCY = Number(values.concurrency);
// Not the service's default bridge nor anything another benchmark may be using meanwhile.
const BRIDGE = 'ucrtbench';

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

/** One pod's life; returns the milliseconds from createPod until its container runs. */
async function lifecycle(runtime: Runtime, output: string, name: string): Promise<number> {
  const started = performance.now();
  const pod = await runtime.createPod({
    name,
    jobId: 'bench',
    owner: 'bench',
    hostname: name,
    limits: { cpuMillis: 1000, memoryBytes: 256 * 1024 * 1024, pids: null },
    shmBytes: null,
  });
  const container = await pod.start({
    name: 'main',
    root: { kind: 'host-view' },
    argv: ['true'],
    env: { PATH: '/usr/bin:/bin' },
    workingDir: null,
    uid: 0,
    gid: 0,
    ...pod.hostIds(0, 0),
    mounts: [],
    files: [{ path: '/etc/hosts', content: `${pod.ip} ${name}\n`, mode: 0o644 }],
    stdout: join(output, `${name}.out`),
    stderr: join(output, `${name}.err`),
  });
  const running = performance.now() - started;
  const exit = await container.exited;
  if (exit.exitCode !== 0) throw new Error(`pod ${name} exited with ${exit.exitCode}`);
  await pod.destroy(1000);
  return running;
}

async function measure(label: string, network: LocalRuntimeOptions['network']) {
  const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-bench-runtime-'));
  const runtime = await createRuntime({ stateDir, network });
  console.log(runtime.description);
  try {
    // Latency: one pod at a time, as a lightly loaded scheduler starts them.
    const latencies: number[] = [];
    for (let i = 0; i < Math.min(PODS, 100); i++) {
      latencies.push(await lifecycle(runtime, stateDir, `lat-${i}`));
      // Let the background pool refill between submissions, as between real job submissions.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    latencies.sort((a, b) => a - b);
    // Throughput: every pod's whole life, CONCURRENCY at a time.
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < PODS) await lifecycle(runtime, stateDir, `tput-${next++}`);
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `${label}: createPod+start to running p50 ${percentile(latencies, 0.5).toFixed(1)} ms, ` +
        `p99 ${percentile(latencies, 0.99).toFixed(1)} ms (${latencies.length} pods one at a time); ` +
        `${(PODS / seconds).toFixed(0)} pods/s through create-start-exit-destroy (${PODS} pods, ${CONCURRENCY} at a time)`,
    );
  } finally {
    await runtime.close();
    await rm(stateDir, { recursive: true, force: true });
  }
}

try {
  await measure('network namespace per pod', { bridge: BRIDGE, subnet: '10.87.0.0/16' });
  await measure('host network (loopback)', 'loopback');
} finally {
  await removeBridgeNetwork(BRIDGE);
}
