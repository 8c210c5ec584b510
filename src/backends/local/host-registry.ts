import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';
import {
  CHUNK_SIZE,
  type Claim,
  type ConfiguredNames,
  chooseNames,
  cidrsOverlap,
  collisions,
  describeIds,
  freeIdChunk,
  type HostNames,
  idsOverlap,
  LAST_HOST_ID,
  LEGACY_NAMES,
  type Taken,
} from './host-names.ts';
import { underHostLock } from './state-lock.ts';

/**
 * Where the instances of this host record the names they hold (one file per instance), outside
 * every data folder: removing one instance's data folder forgets its claim, nothing else.
 */
export const HOST_REGISTRY = '/var/lib/ucompute-instances';
const LOCK = 'host-registry';

/** One instance's hold on its host names. */
export interface InstanceNames {
  readonly names: HostNames;
  /** Claims one more chunk of host ids (the owners' ranges filled the others) and answers all of them. */
  moreHostIds(): Promise<readonly [number, number][]>;
}

export interface ClaimOptions {
  /** The runtime's state folder: the instance is known by its real path. */
  stateDir: string;
  /** The data folder named in messages (default: the state folder). */
  dataDir?: string;
  configured: ConfiguredNames;
  registry?: string;
  /** The host's interfaces and IPv4 routes (default: read from the host; tests give their own). */
  hostNetwork?: (bridge: string | undefined) => Promise<Omit<Taken, 'claims'>>;
}

const claimFile = (registry: string, tag: string) => join(registry, `${tag}.json`);
const savedFile = (stateDir: string) => join(stateDir, 'host-names.json');

async function writeAtomically(file: string, value: unknown): Promise<void> {
  await writeFile(`${file}.new`, JSON.stringify(value), { mode: 0o600 });
  await rename(`${file}.new`, file);
}

/** Every live claim of the registry but `own`'s; claims whose state folder is gone are dropped. */
async function otherClaims(registry: string, ownStateDir: string): Promise<Claim[]> {
  await mkdir(registry, { recursive: true, mode: 0o700 });
  const claims: Claim[] = [];
  for (const name of await readdir(registry)) {
    if (!name.endsWith('.json')) continue;
    const claim: Claim | null = await readFile(join(registry, name), 'utf8').then(JSON.parse, () => null);
    if (!claim || claim.stateDir === ownStateDir) continue;
    if ((await stat(claim.stateDir).catch(() => null)) === null) {
      await rm(join(registry, name), { force: true });
      continue;
    }
    claims.push(claim);
  }
  return claims;
}

/** Interfaces and IPv4 routes of the host (but `bridge`'s own routes). */
async function hostNetwork(bridge: string | undefined): Promise<Omit<Taken, 'claims'>> {
  const links = new Set(await readdir('/sys/class/net').catch(() => []));
  const routes = (
    JSON.parse(await run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'])) as {
      dst: string;
      dev?: string;
    }[]
  )
    .filter((r) => r.dst !== 'default' && r.dev !== bridge && /^[\d.]+(\/\d+)?$/.test(r.dst))
    .map((r) => (r.dst.includes('/') ? r.dst : `${r.dst}/32`));
  return { links, routes };
}

/**
 * The names a data folder used before instances owned their names: its pods ran on them, and its
 * owners' files carry their ids. Null for a folder that never ran a pod.
 */
async function legacyNames(stateDir: string): Promise<HostNames | null> {
  const ranges: Record<string, number> | null = await readFile(
    join(stateDir, 'userns', 'ranges.json'),
    'utf8',
  ).then(JSON.parse, () => null);
  const pods = await readdir(join(stateDir, 'pods')).catch(() => []);
  if (ranges === null && pods.length === 0) return null;
  const first = LEGACY_NAMES.firstHostId;
  const chunks = new Set(Object.values(ranges ?? {}).map((base) => Math.floor((base - first) / CHUNK_SIZE)));
  if (chunks.size === 0) chunks.add(0);
  const { firstHostId: _, ...names } = LEGACY_NAMES;
  return {
    ...names,
    hostIds: [...chunks].sort((a, b) => a - b).map((k) => [first + k * CHUNK_SIZE, CHUNK_SIZE]),
  };
}

function refusal(dataDir: string, found: string[]): Error {
  return new Error(
    `this ucompute instance (data folder ${dataDir}) cannot start beside another on this host: ${found.join('; ')}. ` +
      'Configure other names (local.network.bridge, local.network.subnet, local.cgroupParent, local.userNamespaces.first), ' +
      'or remove that data folder if its instance is gone for good',
  );
}

/**
 * Claims this instance's host names in the registry, under a host-wide lock: its saved names (or
 * configured, or derived from its folder), refused with a sentence naming the other instance's data
 * folder when another instance holds one of them. Saved in the state folder, so a restart keeps them.
 */
export async function claimHostNames(o: ClaimOptions): Promise<InstanceNames> {
  const registry = o.registry ?? HOST_REGISTRY;
  await mkdir(o.stateDir, { recursive: true, mode: 0o711 });
  const stateDir = await realpath(o.stateDir);
  const dataDir = o.dataDir ?? stateDir;
  const own = claimFile(registry, createHash('sha256').update(stateDir).digest('hex').slice(0, 24));
  const record = async (names: HostNames) => {
    await writeAtomically(own, { ...names, dataDir, stateDir } satisfies Claim);
    await writeAtomically(savedFile(stateDir), names);
  };
  let names = await underHostLock(LOCK, async () => {
    const claims = await otherClaims(registry, stateDir);
    const saved: HostNames | null =
      (await readFile(savedFile(stateDir), 'utf8').then(JSON.parse, () => null)) ??
      (await legacyNames(stateDir));
    const host = await (o.hostNetwork ?? hostNetwork)(o.configured.bridge ?? saved?.bridge);
    const chosen = chooseNames(stateDir, o.configured, saved, { claims, ...host });
    const found = claims.flatMap((claim) => collisions(chosen, claim));
    const route = host.routes.find((r) => cidrsOverlap(r, chosen.subnet));
    if (route) found.push(`subnet ${chosen.subnet} overlaps the host's route to ${route}`);
    if (found.length > 0) throw refusal(dataDir, found);
    await record(chosen);
    return chosen;
  });
  return {
    get names() {
      return names;
    },
    moreHostIds: () =>
      underHostLock(LOCK, async () => {
        const claims = await otherClaims(registry, stateDir);
        const [lastFirst, lastCount] = names.hostIds.at(-1)!;
        const chunk =
          o.configured.firstHostId !== undefined
            ? ([lastFirst + lastCount, CHUNK_SIZE] as [number, number])
            : freeIdChunk(LEGACY_NAMES.firstHostId, names.hostIds, { claims, links: new Set(), routes: [] });
        if (!chunk || chunk[0] + chunk[1] - 1 > LAST_HOST_ID) {
          throw new Error(
            `no host ids left for another owner's user namespace (this instance holds ${describeIds(names.hostIds)})`,
          );
        }
        const next = { ...names, hostIds: [...names.hostIds, chunk] };
        const holder = claims.find((claim) => idsOverlap([chunk], claim.hostIds));
        if (holder) {
          throw refusal(dataDir, [
            `host ids ${describeIds([chunk])} overlap ${describeIds(holder.hostIds)} of the ucompute instance whose data folder is ${holder.dataDir}`,
          ]);
        }
        await record(next);
        names = next;
        return names.hostIds;
      }),
  };
}
