/**
 * A test runtime for the local backend's controller: containers are plain host processes (no
 * sandbox, no network), so the Volcano semantics can be tested quickly and on any machine. Every
 * pod and container spec is recorded for the tests to inspect. The real runtime has its own tests.
 */
import { spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import type {
  ContainerExit,
  ContainerSpec,
  Pod,
  PodSpec,
  RunningContainer,
  Runtime,
} from '../../src/backends/local/runtime.ts';

export interface ProcessRuntime extends Runtime {
  pods: Map<
    string,
    { spec: PodSpec; containers: ContainerSpec[]; peers: readonly string[]; destroyed: boolean }
  >;
  live(): number;
}

export function processRuntime(
  dir: string,
  capacity = { cpuMillis: 8000, memoryBytes: 16 * 2 ** 30 },
): ProcessRuntime {
  const pods: ProcessRuntime['pods'] = new Map();
  const alive = new Set<number>();
  let nextIp = 1;
  return {
    description: 'plain processes (test runtime)',
    hostNames: null,
    warnings: [],
    capacity,
    pods,
    live: () => alive.size,
    async createPod(spec: PodSpec): Promise<Pod> {
      const record = {
        spec,
        containers: [] as ContainerSpec[],
        peers: [] as readonly string[],
        destroyed: false,
      };
      pods.set(spec.name, record);
      const pids = new Set<number>();
      const started: RunningContainer[] = [];
      const ip = `10.0.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;
      return {
        name: spec.name,
        jobId: spec.jobId,
        ip,
        // Plain processes run as the test's own user.
        hostIds: () => ({ hostUid: process.getuid!(), hostGid: process.getgid!() }),
        async volumeDir(volume) {
          const d = join(dir, spec.name, volume);
          await mkdir(d, { recursive: true });
          return d;
        },
        async start(c) {
          if (record.destroyed) throw new Error('pod destroyed');
          record.containers.push(c);
          const child = spawn(c.argv[0]!, c.argv.slice(1), {
            env: c.env,
            stdio: ['ignore', openSync(c.stdout, 'a'), openSync(c.stderr, 'a')],
            detached: true,
          });
          const pid = child.pid!;
          pids.add(pid);
          alive.add(pid);
          const exited = new Promise<ContainerExit>((resolve) =>
            child.on('exit', (code, signal) => {
              pids.delete(pid);
              alive.delete(pid);
              // A test marks "out of memory" by exiting 137 with this variable set.
              const exitCode = code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
              const oom = c.env.FAKE_OOM === '1' && exitCode === 137;
              resolve({ exitCode, signal: signal ?? null, oomKilled: oom });
            }),
          );
          const running = { name: c.name, exited };
          started.push(running);
          return running;
        },
        containers: () => started,
        async allowPeers(ips) {
          record.peers = ips;
        },
        async shell() {
          throw new Error('no shell in the test runtime');
        },
        async connect() {
          throw new Error('no network in the test runtime');
        },
        async usage() {
          return { cpuSeconds: null, memoryBytes: null };
        },
        async destroy(graceMs) {
          record.destroyed = true;
          for (const pid of pids) process.kill(-pid, 'SIGTERM');
          for (let waited = 0; pids.size > 0 && waited < graceMs; waited += 10) {
            await new Promise((r) => setTimeout(r, 10));
          }
          for (const pid of pids) process.kill(-pid, 'SIGKILL');
          await Promise.all(started.map((s) => s.exited));
          await rm(join(dir, spec.name), { recursive: true, force: true });
        },
      };
    },
    async recover() {
      return [];
    },
    async close() {},
  };
}
