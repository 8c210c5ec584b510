/**
 * A test runtime for the local backend's controller: containers are plain host processes (no
 * sandbox, the host's network), so the Volcano semantics can be tested quickly and on any machine. Every
 * pod and container spec is recorded for the tests to inspect. The real runtime has its own tests.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { openSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
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
      await mkdir(dir, { recursive: true });
      const pids = new Set<number>();
      const started: RunningContainer[] = [];
      const ip = `10.0.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;
      return {
        name: spec.name,
        jobId: spec.jobId,
        ip,
        hostsFile: join(dir, `${spec.name}.hosts`),
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
        async exec(name, command, signal) {
          const c = record.containers.findLast((s) => s.name === name);
          if (!c || record.destroyed) throw new Error(`no container ${name}`);
          signal.throwIfAborted();
          // Its own process group, killed whole when the probe gives up on it.
          const child = spawn(command[0]!, command.slice(1), { env: c.env, detached: true });
          let output = '';
          for (const stream of [child.stdout, child.stderr]) stream.on('data', (d: Buffer) => (output += d));
          const kill = () => process.kill(-child.pid!, 'SIGKILL');
          signal.addEventListener('abort', kill, { once: true });
          const [code, killedBy] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
          signal.removeEventListener('abort', kill);
          signal.throwIfAborted();
          return { exitCode: code ?? 128 + (killedBy ? (constants.signals[killedBy] ?? 0) : 0), output };
        },
        // Its processes share the host's network: a port they listen on is the host's loopback port.
        connect: (port) =>
          new Promise((resolve, reject) => {
            const socket = netConnect({ host: '127.0.0.1', port });
            socket.once('connect', () => resolve(socket));
            socket.once('error', reject);
          }),
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
