import { createHash } from 'node:crypto';

/**
 * The names one local backend instance holds on the whole host: its bridge (also the name of its
 * nftables tables and the prefix `<bridge>-` of its network namespaces and veths), its pods'
 * subnet, the folder of its pods' cgroups, and the host ids its owners' user namespaces map to.
 * Two instances on one host (two users, a test beside a real service) never share any of them.
 */
export interface HostNames {
  bridge: string;
  subnet: string;
  cgroupParent: string;
  /** Chunks of host ids, each `[first, count]`; owners' 65,536-id ranges are taken inside them. */
  hostIds: [number, number][];
}

/** Another instance's names, as the host registry records them. */
export interface Claim extends HostNames {
  /** The data folder the operator knows that instance by. */
  dataDir: string;
  /** Its runtime state folder: the claim is stale once this is gone. */
  stateDir: string;
}

/** What the configuration fixes; the rest is derived. */
export interface ConfiguredNames {
  bridge?: string;
  subnet?: string;
  cgroupParent?: string;
  firstHostId?: number;
}

/** Ids per owner (container ids 0..65535). */
export const RANGE_SIZE = 65536;
/** Owners per chunk of host ids an instance claims at a time. */
export const OWNERS_PER_CHUNK = 64;
export const CHUNK_SIZE = RANGE_SIZE * OWNERS_PER_CHUNK;
/** Derived host ids start here (above every ordinary user and the usual /etc/subuid ranges' start). */
export const FIRST_DERIVED_ID = 1_000_000;
/** The last host id a range may use (2^32 - 1 is "no id"). */
export const LAST_HOST_ID = 2 ** 32 - 2;

/** The names an instance had before instances owned theirs: adopted by a data folder that has pods of then. */
export const LEGACY_NAMES: Omit<HostNames, 'hostIds'> & { firstHostId: number } = {
  bridge: 'ucompute0',
  subnet: '10.89.0.0/16',
  cgroupParent: 'ucompute',
  firstHostId: FIRST_DERIVED_ID,
};

/** Derived subnets are /20 blocks (4,093 pods) of 10.64.0.0/10. */
const DERIVED_SUBNETS = { base: ipNumber('10.64.0.0'), bits: 20, count: 1024 };

export function ipNumber(ip: string): number {
  return ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}
const ipText = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');

/** A CIDR's first and last address, as numbers. */
export function cidrRange(cidr: string): [number, number] {
  const [ip = '', bits = '32'] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  const first = ipNumber(ip) - (ipNumber(ip) % size);
  return [first, first + size - 1];
}

const overlaps = (a: [number, number], b: [number, number]) => a[0] <= b[1] && b[0] <= a[1];
export const cidrsOverlap = (a: string, b: string) => overlaps(cidrRange(a), cidrRange(b));
export const idsOverlap = (a: readonly [number, number][], b: readonly [number, number][]) =>
  a.some(([f, n]) => b.some(([g, m]) => overlaps([f, f + n - 1], [g, g + m - 1])));

/** Lowercase letters and digits that stand for a state folder's real path. */
export function folderTag(realStateDir: string, attempt = 0): string {
  const digest = createHash('sha256').update(`${realStateDir}\0${attempt}`).digest();
  return BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)
    .toString(36)
    .padStart(7, '0')
    .slice(-7);
}

/** The sentences that say which of `mine` another instance already holds (none: no collision). */
export function collisions(mine: HostNames, other: Claim): string[] {
  const found: string[] = [];
  const theirs = `the ucompute instance whose data folder is ${other.dataDir}`;
  if (mine.bridge === other.bridge)
    found.push(`bridge ${mine.bridge} (and nftables table, namespaces ${mine.bridge}-*) is ${theirs}'s`);
  if (cidrsOverlap(mine.subnet, other.subnet)) {
    found.push(`subnet ${mine.subnet} overlaps ${other.subnet} of ${theirs}`);
  }
  if (mine.cgroupParent === other.cgroupParent)
    found.push(`cgroup folder ${mine.cgroupParent} is ${theirs}'s`);
  if (idsOverlap(mine.hostIds, other.hostIds))
    found.push(`host ids ${describeIds(mine.hostIds)} overlap ${describeIds(other.hostIds)} of ${theirs}`);
  return found;
}

export const describeIds = (ids: readonly [number, number][]) =>
  ids.map(([first, count]) => `${first}-${first + count - 1}`).join(', ');

/** Everything the host already uses, that a derived name must avoid. */
export interface Taken {
  claims: readonly Claim[];
  /** Network interfaces that exist (bridges of instances the registry does not know included). */
  links: ReadonlySet<string>;
  /** Destinations of the host's IPv4 routes (CIDRs). */
  routes: readonly string[];
}

/** The chunk of host ids the first owner of an instance gets: the lowest one free on the grid from `first`. */
export function freeIdChunk(
  first: number,
  held: readonly [number, number][],
  taken: Taken,
): [number, number] | null {
  const others = taken.claims.flatMap((c) => c.hostIds);
  for (let start = first; start + CHUNK_SIZE - 1 <= LAST_HOST_ID; start += CHUNK_SIZE) {
    const chunk: [number, number] = [start, CHUNK_SIZE];
    if (!idsOverlap([chunk], others) && !idsOverlap([chunk], held)) return chunk;
  }
  return null;
}

/**
 * The names of an instance whose state folder's real path is `realStateDir`: what is configured,
 * else what it saved earlier, else names derived from the folder's path, each moved on from the
 * derived start until nothing on the host holds it. Configured and saved names are kept even when
 * taken: `collisions` then says by whom.
 */
export function chooseNames(
  realStateDir: string,
  configured: ConfiguredNames,
  saved: HostNames | null,
  taken: Taken,
): HostNames {
  let bridge = configured.bridge ?? saved?.bridge;
  for (let attempt = 0; bridge === undefined; attempt++) {
    const candidate = `uc${folderTag(realStateDir, attempt)}`;
    if (!taken.links.has(candidate) && !taken.claims.some((c) => c.bridge === candidate)) bridge = candidate;
  }
  let subnet = configured.subnet ?? saved?.subnet;
  if (subnet === undefined) {
    const used = [...taken.routes, ...taken.claims.map((c) => c.subnet)].map(cidrRange);
    const start = Number.parseInt(folderTag(realStateDir), 36) % DERIVED_SUBNETS.count;
    for (let i = 0; i < DERIVED_SUBNETS.count && subnet === undefined; i++) {
      const size = 2 ** (32 - DERIVED_SUBNETS.bits);
      const first = DERIVED_SUBNETS.base + ((start + i) % DERIVED_SUBNETS.count) * size;
      if (!used.some((range) => overlaps(range, [first, first + size - 1]))) {
        subnet = `${ipText(first)}/${DERIVED_SUBNETS.bits}`;
      }
    }
    if (subnet === undefined)
      throw new Error('no free pod subnet left in 10.64.0.0/10: set local.network.subnet');
  }
  const cgroupParent = configured.cgroupParent ?? saved?.cgroupParent ?? `ucompute-${bridge}`;
  let hostIds = saved?.hostIds ?? [];
  if (configured.firstHostId !== undefined && !hostIds.some(([first]) => first === configured.firstHostId)) {
    hostIds = [[configured.firstHostId, CHUNK_SIZE]];
  }
  if (hostIds.length === 0) {
    const chunk = freeIdChunk(FIRST_DERIVED_ID, [], taken);
    if (!chunk) throw new Error('no free host ids left for user namespaces: set local.userNamespaces.first');
    hostIds = [chunk];
  }
  return { bridge, subnet, cgroupParent, hostIds };
}
