import { closeSync, fstatSync } from 'node:fs';
import { chown, mkdir } from 'node:fs/promises';
import { join, normalize, relative } from 'node:path';
import { openFolder } from '../../storage/folders.ts';
import { bytes, cpuMillis } from '../../volcano/api/quantity.ts';
import type {
  Companion,
  Container,
  EnvVar,
  Quantity,
  ResourceList,
  VolcanoJob,
  Volume,
} from '../../volcano/api/types.ts';
import { containerProcess } from '../../volcano/emulation/expansion.ts';
import type { PodPlan } from '../../volcano/emulation/plugins/plugin.ts';
import { imageArgv, imageEnv, imageUser } from './images/oci-config.ts';
import type { ImageResolver } from './images/resolve.ts';
import { openWithoutSymlinks } from './open-path.ts';
import type { ContainerSpec, FileContent, Mount, Pod, ResourceLimits } from './runtime.ts';
import type { Resources } from './scheduler.ts';

/**
 * From a pod of a Volcano Job to what the runtime runs: resources, volumes, environment and
 * argv, the way the kubelet would make them.
 */

export interface VolumeSources {
  /** The storage claim (ucompute's shared storage) and the host folder that backs it. */
  storageClaim: string;
  storageRoot: string;
  /** Folder for every other volume claim a manifest names (one folder per claim). */
  claimsRoot: string;
  /** ConfigMaps and Secrets that came with the job, for configMap/secret volumes and env. */
  companions: readonly Companion[];
  /** A container's image: its root folder and config, or the host userland view. */
  images: ImageResolver;
}

const SHM_PATH = '/dev/shm';
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A container's requests (or, missing those, its limits). */
function request(c: Container): Resources {
  const of = (key: 'cpu' | 'memory', list?: ResourceList) => list?.[key];
  const cpu = of('cpu', c.resources?.requests) ?? of('cpu', c.resources?.limits);
  const memory = of('memory', c.resources?.requests) ?? of('memory', c.resources?.limits);
  return { cpuMillis: cpu ? cpuMillis(cpu) : 0, memoryBytes: memory ? bytes(memory) : 0 };
}

/** What a pod needs to be placed: its containers together, or its largest init container alone. */
export function podRequest(plan: PodPlan): Resources {
  const spec = plan.task.template.spec;
  const main = spec.containers
    .map(request)
    .reduce(
      (a, b) => ({ cpuMillis: a.cpuMillis + b.cpuMillis, memoryBytes: a.memoryBytes + b.memoryBytes }),
      { cpuMillis: 0, memoryBytes: 0 },
    );
  for (const init of (spec.initContainers ?? []).map(request)) {
    main.cpuMillis = Math.max(main.cpuMillis, init.cpuMillis);
    main.memoryBytes = Math.max(main.memoryBytes, init.memoryBytes);
  }
  return main;
}

/** The pod's cgroup limits: the sum of its containers' limits, none where a container has none. */
export function podLimits(plan: PodPlan): ResourceLimits {
  const containers = plan.task.template.spec.containers;
  const sum = (key: 'cpu' | 'memory', parse: (q: Quantity) => number) => {
    let total = 0;
    for (const c of containers) {
      const q = c.resources?.limits?.[key];
      if (q === undefined) return null;
      total += parse(q);
    }
    return total;
  };
  return { cpuMillis: sum('cpu', cpuMillis), memoryBytes: sum('memory', bytes), pids: null };
}

/** The size of the memory-backed volume mounted at /dev/shm, if the pod has one. */
export function podShmBytes(plan: PodPlan): number | null {
  const spec = plan.task.template.spec;
  for (const c of spec.containers) {
    const mount = c.volumeMounts?.find((m) => m.mountPath === SHM_PATH);
    const volume = spec.volumes?.find((v) => v.name === mount?.name);
    if (volume?.emptyDir?.medium === 'Memory') {
      return volume.emptyDir.sizeLimit ? bytes(volume.emptyDir.sizeLimit) : null;
    }
  }
  return null;
}

/** A sub-path inside a volume, refused when it climbs out of it. */
function inside(root: string, subPath: string | undefined, where: string): string {
  if (!subPath) return root;
  const rel = normalize(subPath);
  if (rel.startsWith('..') || rel.startsWith('/'))
    throw new Error(`${where}.subPath: must stay inside the volume`);
  return join(root, rel);
}

function companion(sources: VolumeSources, kind: 'ConfigMap' | 'Secret', name: string) {
  return sources.companions.find((c) => c.kind === kind && c.metadata.name === name);
}

/** The text entries of a ConfigMap or Secret (Secret data is base64). */
function entries(sources: VolumeSources, kind: 'ConfigMap' | 'Secret', name: string): Record<string, string> {
  const object = companion(sources, kind, name);
  if (!object) throw new Error(`the job has no ${kind} named ${name}`);
  if (object.kind === 'ConfigMap') return object.data;
  if (object.kind !== 'Secret') return {};
  const decoded = Object.entries(object.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]);
  return { ...Object.fromEntries(decoded), ...(object.stringData ?? {}) };
}

export interface ContainerContext {
  job: VolcanoJob;
  plan: PodPlan;
  pod: Pod;
  sources: VolumeSources;
  /** Host files of the pod's ranks' output, and the job's /etc/hosts. */
  stdout: string;
  stderr: string;
  hostsFile: string;
  /** Adds a line to the job's updates (e.g. that an image runs on the host userland view). */
  notify(status: string): void;
}

/** The runtime's view of one container of a pod. Errors name the field that cannot be run here. */
export async function containerSpec(
  ctx: ContainerContext,
  c: Container,
  where: string,
): Promise<ContainerSpec> {
  const { plan, sources } = ctx;
  const spec = plan.task.template.spec;
  const withPlugins = {
    ...c,
    env: [...(c.env ?? []), ...plan.env.map(([name, value]) => ({ name, value }))],
  };
  const resolve = (v: EnvVar) => {
    const ref = v.valueFrom?.configMapKeyRef;
    if (!ref) return undefined;
    // The svc plugin's ConfigMap holds exactly the variables the plan already carries.
    return companion(sources, 'ConfigMap', ref.name)
      ? entries(sources, 'ConfigMap', ref.name)[ref.key]
      : undefined;
  };
  // `command` and `args` expanded apart: an image's entrypoint may come between them.
  const { env, argv: command } = containerProcess({ ...withPlugins, args: [] }, resolve);
  const { argv: args } = containerProcess({ ...withPlugins, command: [] }, resolve);
  const image = await sources.images(c.image);
  if (image.notice) ctx.notify(image.notice);
  if (!image.config && command.length === 0 && args.length > 0) {
    // Kubernetes would run the image's entrypoint with these arguments; here nothing says what it is.
    const view =
      image.root.kind === 'host-view' ? "runs on the host's userland view" : 'is a folder from local.images';
    throw new Error(
      `${where}.command: image ${c.image} ${view}, which has no entrypoint to give args to; give the command (args alone would run ${JSON.stringify(args[0])} as one)`,
    );
  }
  const argv = imageArgv(image.config ?? {}, command, args);
  if (argv.length === 0) {
    const why = image.config
      ? `neither the container nor its image ${c.image} has a command (no Entrypoint or Cmd)`
      : `image ${c.image} has no entrypoint here (${image.root.kind === 'host-view' ? "it runs on the host's userland view" : 'a folder from local.images'})`;
    throw new Error(`${where}.command: ${why}; give a command`);
  }
  const { uid, gid } = await imageUser(
    image.root.kind === 'folder' ? image.root.path : '/',
    image.config ?? {},
    {
      runAsUser: c.securityContext?.runAsUser ?? spec.securityContext?.runAsUser,
      runAsGroup: c.securityContext?.runAsGroup ?? spec.securityContext?.runAsGroup,
    },
  );
  const hostIds = ctx.pod.hostIds(uid, gid);
  const mounts: Mount[] = [{ source: ctx.hostsFile, target: '/etc/hosts', readOnly: true }];
  const files: FileContent[] = plan.files.map((f) => ({ ...f }));
  for (const [i, m] of (c.volumeMounts ?? []).entries()) {
    const at = `${where}.volumeMounts[${i}]`;
    const volume = spec.volumes?.find((v) => v.name === m.name);
    if (!volume) throw new Error(`${at}.name: the pod has no volume ${m.name}`);
    if (m.mountPath === SHM_PATH && volume.emptyDir?.medium === 'Memory') continue; // the runtime's /dev/shm
    const source = await volumeSource(ctx, volume, at, hostIds);
    if (source.kind === 'files') {
      for (const [key, content] of Object.entries(source.entries)) {
        files.push({ path: `${m.mountPath.replace(/\/+$/, '')}/${key}`, content, mode: source.mode });
      }
      continue;
    }
    const path = inside(source.path, m.subPath, at);
    if (source.createsSubPaths) {
      // The kubelet creates a missing sub-path folder; so do we, in the folders that are the job's
      // own: below the volume's folder never through a symlink a container planted there.
      await mkdir(source.path, { recursive: true });
      const folder = await openFolder(source.path, relative(source.path, path), { create: true }).catch(
        (e: Error) => {
          throw new Error(`${at}.subPath: ${e.message}`);
        },
      );
      await folder.close();
    }
    if (source.owned && !m.readOnly && !source.readOnly) await giveToContainer(path, hostIds);
    mounts.push({
      source: path,
      target: m.mountPath,
      readOnly: m.readOnly === true || source.readOnly,
    });
  }
  return {
    name: c.name,
    root: image.root,
    argv,
    // Container env overrides the image's; an image without PATH gets Debian's default, as Docker's.
    env: { PATH: DEFAULT_PATH, ...imageEnv(image.config ?? {}), HOSTNAME: plan.hostname, ...env },
    workingDir: c.workingDir ?? image.config?.WorkingDir ?? null,
    uid,
    gid,
    ...hostIds,
    mounts,
    files,
    stdout: ctx.stdout,
    stderr: ctx.stderr,
  };
}

/**
 * A writable folder ucompute made for the job (its job folder, a claim's folder) becomes the
 * container user's: owned by its host ids, so that a non-root container can write its output. Only
 * a folder root still owns (nothing the job made), never through a symlink, never recursively.
 */
async function giveToContainer(path: string, ids: { hostUid: number; hostGid: number }): Promise<void> {
  let fd: number;
  try {
    fd = openWithoutSymlinks(path);
  } catch {
    return; // Missing or a symlink: the runtime refuses the mount with its reason.
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory() && stat.uid === 0 && ids.hostUid !== 0) {
      await chown(`/proc/self/fd/${fd}`, ids.hostUid, ids.hostGid);
    }
  } finally {
    closeSync(fd);
  }
}

type VolumeSource =
  | {
      kind: 'path';
      path: string;
      readOnly: boolean;
      createsSubPaths: boolean;
      /** Storage or a claim (ucompute's folders): what ucompute made there goes to the container's user. */
      owned: boolean;
    }
  | { kind: 'files'; entries: Record<string, string>; mode: number };

async function volumeSource(
  ctx: ContainerContext,
  v: Volume,
  at: string,
  owner: { hostUid: number; hostGid: number },
): Promise<VolumeSource> {
  const { sources } = ctx;
  if (v.persistentVolumeClaim) {
    const claim = v.persistentVolumeClaim.claimName;
    // The storage holds users' files and inputs: nothing is created there on a job's behalf (the job
    // folder exists already); other claims are folders of their own.
    const storage = claim === sources.storageClaim;
    const path = storage ? sources.storageRoot : join(sources.claimsRoot, claim);
    return {
      kind: 'path',
      path,
      readOnly: v.persistentVolumeClaim.readOnly === true,
      createsSubPaths: !storage,
      owned: true,
    };
  }
  if (v.emptyDir) {
    return {
      kind: 'path',
      path: await ctx.pod.volumeDir(v.name, owner),
      readOnly: false,
      createsSubPaths: true,
      owned: false, // volumeDir gave it already
    };
  }
  if (v.hostPath) {
    // The operator's folder, allowed by configuration: its owner stays.
    return { kind: 'path', path: v.hostPath.path, readOnly: false, createsSubPaths: false, owned: false };
  }
  if (v.configMap || v.secret) {
    const kind = v.configMap ? 'ConfigMap' : 'Secret';
    const source = v.configMap ?? v.secret!;
    const name = v.configMap?.name ?? v.secret?.secretName ?? '';
    const all = entries(sources, kind, name);
    const picked = source.items
      ? Object.fromEntries(source.items.map((i) => [i.path, all[i.key] ?? '']))
      : all;
    return { kind: 'files', entries: picked, mode: source.defaultMode ?? 0o644 };
  }
  throw new Error(`${at}: volume ${v.name} is of a kind the local backend cannot provide`);
}
