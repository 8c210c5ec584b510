import { mkdirSync, writeFileSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, stat, statfs } from 'node:fs/promises';
import { isIP } from 'node:net';
import os from 'node:os';
import { dirname, join } from 'node:path';
import {
  type CgroupLayout,
  createPodCgroups,
  describeCgroups,
  detectCgroups,
  podCgroupDirs,
  removeCgroupParent,
} from './cgroups.ts';
import { run, which } from './exec.ts';
import { requireProtectedHardlinks } from './hardlink-protection.ts';
import { claimHostNames, type InstanceNames } from './host-registry.ts';
import { hostView } from './host-view.ts';
import { imageRoots } from './image-roots.ts';
import { startLauncher } from './launcher.ts';
import { loopbackNetwork } from './loopback-network.ts';
import { bridgeNetwork, type NetworkOptions } from './network.ts';
import { type ContainerHandle, findContainers, watchContainers } from './pod/container-handle.ts';
import {
  checkName,
  DEFAULT_LOGS,
  type LogRotation,
  type PodContext,
  type PodRecord,
  podDir,
  podDirMode,
  type Sandbox,
} from './pod/context.ts';
import { podHandle } from './pod/pod.ts';
import { podsStateDir, releasePodsStateDir, TMPFS_MAGIC } from './pods-state-dir.ts';
import { preparedMounts } from './prepared-mounts.ts';
import type { Pod, Runtime } from './runtime.ts';
import { compiledSeccomp } from './seccomp.ts';
import { prepareSysRoot } from './sys-views.ts';
import { type IdRanges, idRanges } from './userns.ts';

export interface LocalRuntimeOptions {
  /**
   * Where pods' records, state files and emptyDir volumes live; a restart must find the same
   * folder. As root, the records and state files are on /dev/shm, linked from there (see podsStateDir).
   */
  stateDir: string;
  /** Runs containers as plain processes, without bubblewrap or a network per pod. */
  unsandboxed?: boolean;
  /**
   * The pod network when running as root; `loopback`: the host network with a loopback address per
   * pod even as root (no network isolation), where a bridge cannot be used.
   */
  network?: NetworkOptions | 'loopback';
  /** Overrides what is detected (CPUs × 1000, total memory). */
  capacity?: { cpuMillis?: number; memoryBytes?: number };
  /** Most processes of a pod whose limits leave it open. Default 4096. */
  defaultPids?: number;
  /** Rotation of each container's output files. Default 10 MiB, 5 files. */
  logs?: Partial<LogRotation>;
  /** How often containers of recovered pods are checked for their end. Default 500 ms. */
  recoveredPollMs?: number;
  /**
   * The first host id of the owners' id ranges (65,536 ids each) when running as root; the ranges
   * must not overlap host users' ids. Default: chunks no other instance holds, from 1,000,000 on.
   */
  firstHostId?: number;
  /** The folder of the pods' cgroups in each hierarchy. Default: the instance's own (`ucompute-<bridge>`). */
  cgroupParent?: string;
  /** The data folder that messages name this instance by (default: the state folder). */
  dataDir?: string;
}

/** One pod cannot take every process id of the host (pid_max is often 32768). */
const DEFAULT_PIDS = 4096;

const BWRAP_MISSING =
  "bubblewrap (bwrap) is not installed: install Debian's bubblewrap, or set local.unsandboxed: true to run jobs without isolation";

/** The host's resolv.conf without loopback name servers, which a pod's own network cannot reach. */
async function podResolvConf(): Promise<string> {
  const lines = (await readFile('/etc/resolv.conf', 'utf8').catch(() => '')).split('\n');
  const kept = lines.filter((line) => !/^\s*nameserver\s+(127\.|::1)/.test(line));
  if (kept.some((line) => /^\s*nameserver\s/.test(line))) return kept.join('\n');
  // systemd-resolved's stub points at itself; the upstream servers are in its own file.
  return readFile('/run/systemd/resolve/resolv.conf', 'utf8').catch(() => kept.join('\n'));
}

/**
 * The folder for containers' files (see PodContext.secretsDir): as root a tmpfs, mounted here until
 * the runtime closes (running containers keep the files bound in them).
 */
async function secretsDir(stateDir: string, root: boolean): Promise<string> {
  const dir = join(stateDir, 'secrets');
  await mkdir(dir, { recursive: true, mode: 0o711 });
  if (root && (await statfs(dir)).type !== TMPFS_MAGIC) {
    await run('/usr/bin/mount', [
      '-t',
      'tmpfs',
      '-o',
      'mode=0711,size=256m,nosuid,nodev',
      'ucompute-secrets',
      dir,
    ]);
  }
  return dir;
}
/** Whether a folder is where a file system is mounted (another device than its parent's). */
async function isMountPoint(dir: string): Promise<boolean> {
  const [own, parent] = await Promise.all([
    stat(dir).catch(() => null),
    stat(dirname(dir)).catch(() => null),
  ]);
  return own !== null && parent !== null && own.dev !== parent.dev;
}

/** The name servers a resolv.conf lists. */
const nameserversOf = (resolvConf: string) =>
  [...resolvConf.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => m[1]!).filter((ip) => isIP(ip) !== 0);

async function readRecord(podsDir: string, name: string): Promise<PodRecord | null> {
  try {
    return JSON.parse(await readFile(join(podsDir, name, 'pod.json'), 'utf8'));
  } catch {
    return null;
  }
}

/** The local machine's pods: bubblewrap, cgroups and a bridge network as root; less without. */
export async function createRuntime(options: LocalRuntimeOptions): Promise<Runtime> {
  const root = process.getuid?.() === 0;
  const warnings: string[] = [];
  const configured = options.network === 'loopback' ? null : (options.network ?? {});
  // As root the instance holds names on the whole host: claimed first, refused if another holds one.
  const instance: InstanceNames | null = root
    ? await claimHostNames({
        stateDir: options.stateDir,
        ...(options.dataDir !== undefined ? { dataDir: options.dataDir } : {}),
        configured: {
          ...(configured?.bridge !== undefined ? { bridge: configured.bridge } : {}),
          ...(configured?.subnet !== undefined ? { subnet: configured.subnet } : {}),
          ...(options.cgroupParent !== undefined ? { cgroupParent: options.cgroupParent } : {}),
          ...(options.firstHostId !== undefined ? { firstHostId: options.firstHostId } : {}),
        },
      })
    : null;
  let sandbox: Sandbox;
  if (options.unsandboxed) {
    sandbox = { kind: 'none', root };
    warnings.push(
      'unsandboxed: containers run as plain host processes; nothing is isolated (files, mounts, network, limits)',
    );
  } else {
    const bwrap = await which('bwrap');
    if (!bwrap) throw new Error(BWRAP_MISSING);
    if (root) await requireProtectedHardlinks();
    await mkdir(options.stateDir, { recursive: true, mode: 0o711 });
    const ids = instance
      ? await idRanges(join(options.stateDir, 'userns'), {
          chunks: instance.names.hostIds,
          more: () => instance.moreHostIds(),
        })
      : null;
    const roots =
      ids &&
      (await imageRoots(
        join(options.stateDir, 'image-roots'),
        (base) => ids.namespaceFile(base, 0, 0),
        (why) =>
          warnings.push(
            `images run with their own file ids, not their owner's (no idmapped mount here: ${why}): their private folders (such as /root) stay closed to containers`,
          ),
      ));
    const seccomp = await compiledSeccomp(options.stateDir);
    sandbox = {
      kind: 'bwrap',
      bwrap,
      root,
      hostView: await hostView(join(options.stateDir, 'host-view')),
      sysRoot: join(options.stateDir, 'sys-view'),
      prepared: [],
      seccomp: seccomp.program,
      syscalls: seccomp.syscalls,
      ids,
      imageRoots: roots,
    };
  }
  let cgroups: CgroupLayout | null = null;
  if (root) {
    cgroups = await detectCgroups();
    if (cgroups.missing.length > 0) {
      warnings.push(`no cgroup controller for ${cgroups.missing.join(', ')}: those limits are not enforced`);
    }
  } else {
    warnings.push('not root: no cgroups, so CPU, memory and process limits are not enforced');
    if (sandbox.kind === 'bwrap')
      warnings.push(
        "not root: container ids are not remapped: containers run as ucompute's own user, whatever uid they ask for",
      );
  }
  if (sandbox.kind === 'bwrap') {
    await prepareSysRoot(sandbox.sysRoot, cgroups);
    sandbox.prepared = preparedMounts(sandbox.hostView.wholeFolders ?? [], sandbox.sysRoot, cgroups);
  }
  const podsDir = await podsStateDir(options.stateDir, root);
  const volumesDir = join(options.stateDir, 'volumes');
  await mkdir(volumesDir, { recursive: true, mode: podDirMode });
  // Bubblewrap 0.8 finds what it binds by path, as the container's host user: the folders on the way
  // can be passed, not listed; what lies in them is the container's own (0600) or public.
  for (const folder of [options.stateDir, podsDir, volumesDir]) await chmod(folder, podDirMode);
  // Addresses of pods an earlier process left are taken before the pool of namespaces fills.
  const reserved = (await Promise.all((await readdir(podsDir)).map((name) => readRecord(podsDir, name))))
    .filter((r): r is PodRecord => r !== null)
    .map((r) => r.network.ip);
  const resolvConf = await podResolvConf();
  const launcher = startLauncher();
  const network =
    instance && sandbox.kind === 'bwrap' && configured !== null
      ? await bridgeNetwork(
          { ...configured, bridge: instance.names.bridge, subnet: instance.names.subnet },
          {
            journal: join(options.stateDir, 'namespaces'),
            reserved,
            nameservers: nameserversOf(resolvConf),
            run: launcher.run,
            setns: sandbox.syscalls.setns,
          },
        ).catch(async (error) => {
          launcher.close();
          await releasePodsStateDir(options.stateDir, podsDir);
          throw error;
        })
      : loopbackNetwork(reserved);
  warnings.push(...network.warnings);

  let closed = false;
  /** What close() removes but a pod left then still needs: its folder of cgroups, its state files' folder. */
  const releaseShared = async () => {
    if (cgroups && instance) await removeCgroupParent(cgroups, instance.names.cgroupParent);
    await releasePodsStateDir(options.stateDir, podsDir);
  };
  const context: PodContext = {
    podsDir,
    volumesDir,
    // A pod destroyed after the runtime closed may have been the last one: what close() kept for
    // it goes with it (the cgroup folder stayed behind in every full suite until it did).
    podGone: () => (closed ? releaseShared() : Promise.resolve()),
    secretsDir: await secretsDir(options.stateDir, root && sandbox.kind === 'bwrap'),
    sandbox,
    cgroups,
    network,
    resolvConf,
    launcher,
    logs: {
      maxSizeBytes: options.logs?.maxSizeBytes ?? DEFAULT_LOGS.maxSizeBytes,
      maxFiles: options.logs?.maxFiles ?? DEFAULT_LOGS.maxFiles,
    },
  };
  const defaultPids = options.defaultPids ?? DEFAULT_PIDS;
  const recovered: Map<string, ContainerHandle>[] = [];
  const stopWatching = watchContainers(
    () => recovered.flatMap((containers) => [...containers.values()]),
    options.recoveredPollMs ?? 500,
  );

  const sandboxDescription =
    sandbox.kind === 'bwrap'
      ? `bubblewrap (${root ? 'a user namespace per owner, seccomp' : "ucompute's own user, seccomp"})`
      : 'unsandboxed processes';
  const description = [
    `local runtime: ${sandboxDescription}`,
    cgroups ? describeCgroups(cgroups) : 'no cgroups',
    network.description,
  ].join('; ');

  return {
    description,
    warnings,
    hostNames: instance?.names ?? null,
    capacity: {
      cpuMillis: options.capacity?.cpuMillis ?? os.availableParallelism() * 1000,
      memoryBytes: options.capacity?.memoryBytes ?? os.totalmem(),
    },
    async createPod(spec): Promise<Pod> {
      checkName('pod', spec.name);
      const dir = podDir(context, spec.name);
      try {
        mkdirSync(dir, { mode: podDirMode });
      } catch {
        throw new Error(`pod ${spec.name} already exists in ${context.podsDir}`);
      }
      try {
        const ranges: IdRanges | null = sandbox.kind === 'bwrap' ? sandbox.ids : null;
        const record: PodRecord = {
          spec,
          idBase: ranges ? await ranges.base(spec.owner) : null,
          network: await network.acquire(),
          cgroups: cgroups && instance ? podCgroupDirs(cgroups, instance.names.cgroupParent, spec.name) : [],
          peers: [],
        };
        // Recorded before the cgroups exist, so that a crash in between leaves nothing unknown.
        // Synchronous, as the pod's other small files are (see pod/pod.ts).
        writeFileSync(join(dir, 'pod.json'), JSON.stringify(record));
        if (cgroups && instance) {
          await createPodCgroups(cgroups, instance.names.cgroupParent, spec.name, spec.limits, defaultPids);
        }
        return podHandle(context, record, new Map());
      } catch (error) {
        const record = await readRecord(podsDir, spec.name);
        if (record) await podHandle(context, record, new Map()).destroy(0);
        else await rm(dir, { recursive: true, force: true });
        throw error;
      }
    },
    async recover() {
      const pods: Pod[] = [];
      const live: PodRecord[] = [];
      for (const name of await readdir(context.podsDir)) {
        const record = await readRecord(podsDir, name);
        const destroying = await readFile(join(podDir(context, name), 'destroying')).then(
          () => true,
          () => false,
        );
        const containers = record
          ? await findContainers(context, record)
          : new Map<string, ContainerHandle>();
        if (!record || destroying || containers.size === 0) {
          // Half created, half destroyed, or never started anything: nothing to report, only to clean.
          if (record) await podHandle(context, record, containers).destroy(0);
          else await rm(podDir(context, name), { recursive: true, force: true });
          continue;
        }
        recovered.push(containers);
        live.push(record);
        pods.push(podHandle(context, record, containers));
      }
      await network.removeLeftovers(live.map((r) => r.network));
      // Volumes of pods whose state is gone (the machine restarted, or the pod was cleaned above).
      for (const name of await readdir(volumesDir)) {
        if (!live.some((r) => r.spec.name === name))
          await rm(join(volumesDir, name), { recursive: true, force: true });
      }
      return pods;
    },
    async close() {
      closed = true;
      stopWatching();
      await network.close();
      if (sandbox.kind === 'bwrap') {
        await sandbox.imageRoots?.close();
        await sandbox.ids?.close();
      }
      // Once: a second close (or one after the folder is gone) finds nothing mounted. A state
      // folder on a tmpfs already got no mount of its own (see secretsDir): nothing to unmount.
      if (root && sandbox.kind === 'bwrap' && (await isMountPoint(context.secretsDir))) {
        await run('/usr/bin/umount', ['--lazy', context.secretsDir]);
      }
      await releaseShared();
      launcher.close();
    },
  };
}
