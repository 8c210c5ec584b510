import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { dirname, join } from 'node:path';
import { readPodUsage } from '../cgroup-usage.ts';
import { oomKillCount } from '../cgroups.ts';
import type { ContainerSpec, Pod, RunningContainer } from '../runtime.ts';
import { supervisorArguments } from '../supervisor.ts';
import { checkContainerIds } from '../userns.ts';
import { containerCommand, writeContainerFiles } from './container-command.ts';
import {
  type ContainerHandle,
  type ContainerRecord,
  containerHandle,
  SANDBOX_STATUS,
} from './container-handle.ts';
import { checkName, type PodContext, type PodRecord, podDir, procsFiles, secretsOf } from './context.ts';
import { execInContainer } from './exec.ts';
import { openShell } from './shell.ts';
import { removeCgroups, stopPod } from './stop.ts';

/** How long a connection to a pod's port may take to be answered (its network is local). */
const CONNECT_TIMEOUT_MS = 5_000;

/** A pod's object, for a new pod and for one found again after a restart. */
export function podHandle(context: PodContext, record: PodRecord, found: Map<string, ContainerHandle>): Pod {
  const dir = podDir(context, record.spec.name);
  const containersDir = join(dir, 'containers');
  const containers = found;
  let destroying: Promise<void> | null = null;
  /** Starts under way: destroy waits for them, so that no supervisor appears after it looked. */
  const starting = new Set<Promise<unknown>>();

  const saveRecord = () => writeFile(join(dir, 'pod.json'), JSON.stringify(record));

  const supervisorPids = () =>
    new Set([...containers.values()].map((c) => c.pid).filter((p): p is number => p !== null));

  function start(spec: ContainerSpec): Promise<RunningContainer> {
    if (destroying) return Promise.reject(new Error(`pod ${record.spec.name} is being destroyed`));
    const started = startContainer(spec);
    starting.add(started);
    const done = () => starting.delete(started);
    started.then(done, done);
    return started;
  }

  async function startContainer(spec: ContainerSpec): Promise<RunningContainer> {
    checkName('container', spec.name);
    const previous = containers.get(spec.name);
    if (previous && !previous.ended) {
      throw new Error(`container ${spec.name} of pod ${record.spec.name} is still running`);
    }
    if (record.idBase !== null) checkContainerIds(spec.uid, spec.gid);
    const ids = hostIds(spec.uid, spec.gid);
    if (spec.hostUid !== ids.hostUid || spec.hostGid !== ids.hostGid) {
      throw new Error(
        `container ${spec.name}: hostUid/hostGid ${spec.hostUid}/${spec.hostGid} are not the host ids of uid/gid ${spec.uid}/${spec.gid} in pod ${record.spec.name} (${ids.hostUid}/${ids.hostGid})`,
      );
    }
    const stateDir = join(containersDir, spec.name);
    const secrets = secretsOf(context, record.spec.name, spec.name);
    // Synchronous, as a job's folders are made (see controller/persistence.ts); a container that
    // starts again finds its earlier files gone.
    for (const folder of [stateDir, secrets]) {
      rmSync(folder, { recursive: true, force: true });
      mkdirSync(folder, { recursive: true, mode: 0o711 });
    }
    const placements = await writeContainerFiles(context, spec, secrets, dir, hostIds);
    const containerRecord: ContainerRecord = {
      // Without its environment (Secrets among it), which stays off the disk: a shell in a
      // recovered container takes it from the container's process.
      spec: { ...spec, env: {} },
      oomBase: context.cgroups ? await oomKillCount(context.cgroups, record.cgroups) : 0,
    };
    writeFileSync(join(stateDir, 'container.json'), JSON.stringify(containerRecord), { mode: 0o600 });
    const {
      argv: command,
      env,
      readFds,
      pathFds,
      netns,
      prepared,
      hostIds: supervisorIds,
    } = await containerCommand(context, record, spec, placements, dir, secrets);
    for (const file of [spec.stdout, spec.stderr]) mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    if (destroying) throw new Error(`pod ${record.spec.name} is being destroyed`);
    let handle: ContainerHandle | null = null;
    const args = supervisorArguments({
      stateDir,
      cgroupProcs: procsFiles(record.cgroups),
      stdout: spec.stdout,
      stderr: spec.stderr,
      logs: context.logs,
      netns,
      prepared,
      hostIds: supervisorIds,
      syscalls: context.sandbox.kind === 'bwrap' ? context.sandbox.syscalls : null,
      sandboxStatus: context.sandbox.kind === 'bwrap' ? join(stateDir, SANDBOX_STATUS) : null,
      argv: command,
    });
    const pid = await context.launcher
      .startSupervisor(
        {
          args,
          // Descriptors 3 onwards: what bubblewrap reads, numbered as its arguments say.
          readFds,
          pathFds,
          cwd: context.sandbox.kind === 'none' ? (spec.workingDir ?? '/') : '/',
          env,
        },
        () => void handle?.check(),
      )
      .catch((error: Error) => {
        throw new Error(`could not start container ${spec.name}: ${error.message}`);
      });
    handle = containerHandle(context, record, spec.name, stateDir, containerRecord, pid);
    containers.set(spec.name, handle);
    // It may have ended before its handle existed.
    void handle.check();
    return handle.running;
  }

  function hostIds(uid: number, gid: number) {
    if (record.idBase !== null) return { hostUid: record.idBase + uid, hostGid: record.idBase + gid };
    // Unsandboxed as root: the container's own ids (see dropPrivileges); otherwise ucompute's own.
    if (context.sandbox.kind === 'none' && context.sandbox.root) return { hostUid: uid, hostGid: gid };
    return { hostUid: process.getuid!(), hostGid: process.getgid!() };
  }

  return {
    name: record.spec.name,
    jobId: record.spec.jobId,
    ip: record.network.ip,
    hostsFile: join(dir, 'hosts'),
    async volumeDir(volume, owner) {
      checkName('volume', volume);
      const folder = join(context.volumesDir, record.spec.name);
      const path = join(folder, volume);
      await mkdir(folder, { recursive: true, mode: 0o711 });
      const created = await mkdir(path).then(
        () => true,
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'EEXIST') return false;
          throw error;
        },
      );
      if (created) {
        // Like Kubernetes' emptyDir: writable by whichever user the containers run as; owned by the
        // first one's host ids, so that files created there belong to the owner's range.
        await chown(path, owner.hostUid, owner.hostGid);
        await chmod(path, 0o777);
      }
      return path;
    },
    hostIds,
    start,
    containers: () => [...containers.values()].map((c) => c.running),
    async allowPeers(ips) {
      // Its own address needs no rule (see network.ts): a pod alone has nothing to change or save.
      const peers = ips.filter((ip) => ip !== record.network.ip);
      if (peers.length === record.peers.length && peers.every((ip) => record.peers.includes(ip))) return;
      await context.network.allowPeers(record.network, record.peers, peers);
      record.peers = peers;
      await saveRecord();
    },
    shell: (options) => openShell(context, record, [...containers.values()].at(-1), options),
    exec: (name, command, signal) =>
      execInContainer(context, record, name, containers.get(name), command, signal),
    connect: (port) =>
      new Promise((resolve, reject) => {
        const socket = netConnect({ host: record.network.ip, port });
        // An unanswered SYN would otherwise hold the caller (a proxied request) for minutes.
        socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(new Error('no answer in time')));
        socket.once('connect', () => {
          socket.setTimeout(0);
          resolve(socket);
        });
        socket.once('error', (error) =>
          reject(new Error(`could not connect to pod ${record.spec.name} port ${port}: ${error.message}`)),
        );
      }),
    usage: () =>
      context.cgroups
        ? readPodUsage(context.cgroups, record.cgroups)
        : Promise.resolve({ cpuSeconds: null, memoryBytes: null }),
    destroy(graceMs) {
      destroying ??= (async () => {
        try {
          writeFileSync(join(dir, 'destroying'), '');
        } catch {
          // Its folder is gone already.
        }
        await Promise.allSettled(starting);
        await stopPod(context, record, supervisorPids(), graceMs);
        await Promise.all([...containers.values()].map((c) => c.check()));
        await removeCgroups(record);
        await context.network.release(record.network, record.peers);
        // The pod's records and its Secrets' files, a few small files: synchronous, one call each
        // (node:fs/promises' rm walks a tree in many trips through libuv's thread pool, each
        // refusal an Error made: ~7 % of the event loop's busy time in a burst of 500 jobs). Its
        // emptyDir volumes can hold anything: in the thread pool, and only when there are some.
        rmSync(dir, { recursive: true, force: true });
        rmSync(join(context.secretsDir, record.spec.name), { recursive: true, force: true });
        const volumes = join(context.volumesDir, record.spec.name);
        if (existsSync(volumes)) await rm(volumes, { recursive: true, force: true });
        await context.podGone();
      })();
      return destroying;
    },
  };
}
