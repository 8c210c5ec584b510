import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before } from 'node:test';
import { createRuntime, type LocalRuntimeOptions } from '../../src/backends/local/create-runtime.ts';
import { removeBridgeNetwork } from '../../src/backends/local/network.ts';
import type {
  ContainerSpec,
  Pod,
  PodSpec,
  RunningContainer,
  Runtime,
} from '../../src/backends/local/runtime.ts';
import { sharedHostView } from './host-view.ts';
import { needs } from './local-tools.ts';
import { until } from './until.ts';

/**
 * Why these tests cannot run here, or null. Under CI a missing prerequisite is a failure, not a skip:
 * CI installs bubblewrap, nftables and iproute2 and runs as root.
 */
export async function missingPrerequisite(): Promise<string | null> {
  return (await needs('bwrap', 'nft', 'ip', 'nsenter', 'setpriv')).skip ?? null;
}

/** A folder for containers' output, readable by their users, removed after the test. */
export async function outputDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-output-'));
  await chmod(dir, 0o755);
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A container whose host ids are the pod's for its uid and gid unless given. */
export type TestContainer = Omit<ContainerSpec, 'hostUid' | 'hostGid'> &
  Partial<Pick<ContainerSpec, 'hostUid' | 'hostGid'>>;

/** A pod whose containers' host ids and volumes' owners default to the pod's own. */
export type TestPod = Omit<Pod, 'start' | 'volumeDir'> & {
  start(container: TestContainer): Promise<RunningContainer>;
  volumeDir(volume: string, owner?: { hostUid: number; hostGid: number }): Promise<string>;
};

export interface TestRuntime {
  runtime: Runtime;
  stateDir: string;
  options: LocalRuntimeOptions;
  bridge: string;
  /** Creates a pod that is destroyed after the test, whatever happens. */
  pod(name: string, spec?: Partial<PodSpec>): Promise<TestPod>;
  /** A unique name for this test file's run. */
  name(base: string): string;
}

/**
 * One runtime for the test file (made in its `before`, removed in its `after`), for the tests that
 * need only pods of their own: a runtime's start and close (its bridge, its pool's namespaces) cost
 * more than most such tests. Call it in a describe block; read the runtime inside its tests.
 */
export function fileRuntime(extra: Partial<LocalRuntimeOptions> = {}): () => TestRuntime {
  const cleanups: (() => Promise<void>)[] = [];
  let shared: TestRuntime | undefined;
  before(async () => {
    shared = await testRuntime({ after: (fn) => void cleanups.push(fn) }, extra);
  });
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
  });
  return () => {
    if (!shared) throw new Error("the file's runtime is made in its before hook");
    return shared;
  };
}

/** A runtime on its own bridge (and the subnet it derives) and state folder, removed entirely after the test. */
export async function testRuntime(
  t: { after(fn: () => Promise<void>): void },
  extra: Partial<LocalRuntimeOptions> = {},
): Promise<TestRuntime> {
  const tag = process.pid.toString(36).slice(-4) + Math.random().toString(36).slice(2, 5);
  const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-runtime-'));
  const bridge = `ut${tag}`.slice(0, 9);
  // `extra.network` adds to this runtime's own bridge ('loopback' replaces it). The subnet is the
  // one the runtime derives, free on the host under the registry's lock: one drawn at random here
  // was once another runtime's, and the runtime rightly refused to start beside it.
  const { network, ...rest } = extra;
  const options: LocalRuntimeOptions = {
    stateDir,
    network:
      network === 'loopback'
        ? network
        : {
            bridge,
            poolSize: 2,
            ...network,
          },
    recoveredPollMs: 50,
    ...rest,
  };
  // The process's copy of /etc, not one per runtime (see ./host-view.ts).
  await sharedHostView(stateDir);
  const runtime = await createRuntime(options);
  const pods: Pod[] = [];
  t.after(async () => {
    // Every step runs even when an earlier one fails, so that nothing is left on the machine.
    const results = await Promise.allSettled(pods.map((p) => p.destroy(0)));
    results.push(...(await Promise.allSettled([runtime.close()])));
    results.push(...(await Promise.allSettled([removeBridgeNetwork(bridge)])));
    results.push(...(await Promise.allSettled([rm(stateDir, { recursive: true, force: true })])));
    const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (failures.length > 0) throw new AggregateError(failures, `cleaning up runtime ${bridge} failed`);
  });
  return {
    runtime,
    stateDir,
    options,
    bridge,
    name: (base) => `${base}-${tag}`,
    async pod(name, spec = {}) {
      const pod = await runtime.createPod({
        name: `${name}-${tag}`,
        jobId: `job-${tag}`,
        owner: 'default',
        hostname: name,
        limits: { cpuMillis: null, memoryBytes: null, pids: null },
        shmBytes: null,
        ...spec,
      });
      pods.push(pod);
      return {
        ...pod,
        start: (c) => pod.start({ ...pod.hostIds(c.uid, c.gid), ...c }),
        volumeDir: (volume, owner = pod.hostIds(0, 0)) => pod.volumeDir(volume, owner),
      };
    },
  };
}

/** A container on the host userland view whose output goes to files in `dir`. */
export function container(
  dir: string,
  name: string,
  argv: string[],
  extra: Partial<ContainerSpec> = {},
): TestContainer {
  return {
    name,
    root: { kind: 'host-view' },
    argv,
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    workingDir: null,
    uid: 0,
    gid: 0,
    files: [],
    stdout: join(dir, `${name}.out`),
    stderr: join(dir, `${name}.err`),
    ...extra,
    mounts: [NODE_MOUNT, ...(extra.mounts ?? [])],
  };
}

/** The tests' Node, bound where it is: it may live under /tmp (CI's .tools), which pods do not share. */
const NODE_MOUNT = { source: dirname(process.execPath), target: dirname(process.execPath), readOnly: true };

export const output = (spec: TestContainer) => readFile(spec.stdout, 'utf8');
export const errors = (spec: TestContainer) => readFile(spec.stderr, 'utf8');

/**
 * Container commands run the Node that runs the tests (reachable on the host's userland), since
 * CI machines need not have python or netcat.
 */
const node = (script: string) => [process.execPath, '-e', script];

/** A TCP server on `port` that answers every connection with `reply`, as a container command. */
/** What the pod's server answers, once it listens. */
export async function podReply(pod: TestPod, port: number): Promise<string> {
  let text = '';
  await until(
    async () => {
      try {
        text = await new Response((await pod.connect(port)) as unknown as ReadableStream).text();
        return true;
      } catch {
        return false;
      }
    },
    { describe: `pod ${pod.name} answers on ${port}` },
  );
  return text;
}

export const serverArgv = (port: number, reply: string) =>
  node(`require('node:net').createServer((s) => s.end(${JSON.stringify(reply)})).listen(${port}, '0.0.0.0')`);

/** A container command that exits 0 when it can connect to ip:port within a second, else 1. */
export const probeArgv = (ip: string, port: number) =>
  node(`const s = require('node:net').connect({ host: ${JSON.stringify(ip)}, port: ${port}, timeout: 1000 });
s.on('connect', () => process.exit(0));
s.on('error', () => process.exit(1));
s.on('timeout', () => process.exit(1));`);

/** A container command that allocates and touches `bytes` of memory. */
export const allocateArgv = (bytes: number) => node(`Buffer.alloc(${bytes}, 1)`);
