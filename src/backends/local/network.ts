import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { run } from './exec.ts';

/** A pod's network identity. */
export interface PodNetwork {
  ip: string;
  /** Network namespace name (under /run/netns); null on the host network. */
  netns: string | null;
  /** Host end of the pod's veth; null on the host network. */
  veth: string | null;
}

export interface NetworkOptions {
  /** Bridge name, at most 9 characters: veths are named `<bridge>-<id>`. Default `ucompute0`. */
  bridge?: string;
  /** An IPv4 /16 ... /24 subnet; the bridge takes its first address. Default 10.89.0.0/16. */
  subnet?: string;
  /** Namespaces kept ready for new pods, created in the background. Default 8. */
  poolSize?: number;
}

export interface Network {
  readonly description: string;
  readonly warnings: readonly string[];
  /** A fresh network identity for a new pod (never a reused namespace). */
  acquire(): Promise<PodNetwork>;
  /** Replaces the peers `network` may exchange traffic with. */
  allowPeers(network: PodNetwork, previous: readonly string[], next: readonly string[]): Promise<void>;
  /** Removes the pod's namespace, veth and rules. Idempotent. */
  release(network: PodNetwork, peers: readonly string[]): Promise<void>;
  /** The argv prefix that runs a program inside the pod's network. */
  enter(network: PodNetwork): string[];
  /** Removes namespaces and veths of this network that no live pod owns (a crashed process's). */
  removeLeftovers(live: readonly PodNetwork[]): Promise<void>;
  /** Destroys the ready pool; pods keep their networks. */
  close(): Promise<void>;
}

function parseSubnet(subnet: string): { base: number; prefix: number } {
  const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(subnet);
  const prefix = Number(match?.[5]);
  if (!match || prefix < 16 || prefix > 24) {
    throw new Error(`network subnet ${subnet} is not an IPv4 subnet between /16 and /24`);
  }
  const base = match.slice(1, 5).reduce((n, octet) => n * 256 + Number(octet), 0);
  return { base: base - (base % 2 ** (32 - prefix)), prefix };
}

const ipOf = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');

/** Hands out addresses of a range in turn, skipping taken ones, so a freed address is reused late. */
function addressAllocator(first: number, count: number) {
  const taken = new Set<string>();
  let next = 0;
  return {
    take(): string {
      for (let i = 0; i < count; i++) {
        const ip = ipOf(first + ((next + i) % count));
        if (!taken.has(ip)) {
          next = (next + i + 1) % count;
          taken.add(ip);
          return ip;
        }
      }
      throw new Error(`no free pod address left (${count} in use)`);
    },
    mark: (ip: string) => taken.add(ip),
    free: (ip: string) => taken.delete(ip),
  };
}

/** Names of nft objects, bridge ports and namespaces that belong to one bridge network. */
function bridgeNames(bridge: string) {
  if (!/^[a-z][a-z0-9]{0,8}$/.test(bridge)) {
    throw new Error(`network bridge name ${bridge} must be 1-9 lowercase letters or digits`);
  }
  return { table: bridge, portPattern: `${bridge}-*`, prefix: `${bridge}-` };
}

/** Shell-free nft script that creates (or refreshes) the rules; set elements of live pods survive. */
function rulesScript(bridge: string, subnet: string, gateway: string): string {
  const { table, portPattern } = bridgeNames(bridge);
  const ports = `iifname "${portPattern}" oifname "${portPattern}"`;
  return [
    `add table bridge ${table}`,
    // (a . b) is in the set when pod a allows b; traffic flows only when both pods allow each other,
    // which also lets replies through without connection tracking (absent on many bridges).
    `add set bridge ${table} pairs { type ipv4_addr . ipv4_addr; }`,
    `add chain bridge ${table} forward { type filter hook forward priority 0; policy accept; }`,
    `add chain bridge ${table} output { type filter hook output priority 0; policy accept; }`,
    `flush chain bridge ${table} forward`,
    `flush chain bridge ${table} output`,
    `add rule bridge ${table} forward ${ports} ether type arp accept`,
    `add rule bridge ${table} forward ${ports} ether type ip ip saddr . ip daddr @pairs ip daddr . ip saddr @pairs accept`,
    `add rule bridge ${table} forward ${ports} drop`,
    // Pods reach each other over the bridge only, never routed through the host.
    `add rule bridge ${table} output oifname "${portPattern}" ether type ip ip saddr ${subnet} ip saddr != ${gateway} drop`,
    `add table inet ${table}`,
    `add chain inet ${table} input { type filter hook input priority 0; policy accept; }`,
    `add chain inet ${table} forward { type filter hook forward priority 0; policy accept; }`,
    `add chain inet ${table} postrouting { type nat hook postrouting priority 100; policy accept; }`,
    `flush chain inet ${table} input`,
    `flush chain inet ${table} forward`,
    `flush chain inet ${table} postrouting`,
    // The host may connect to pods (session proxy); pods may not open connections to the host.
    `add rule inet ${table} input iifname "${bridge}" ct state established,related accept`,
    `add rule inet ${table} input iifname "${bridge}" drop`,
    `add rule inet ${table} forward iifname "${bridge}" accept`,
    `add rule inet ${table} forward oifname "${bridge}" ct state established,related accept`,
    `add rule inet ${table} forward oifname "${bridge}" drop`,
    `add rule inet ${table} postrouting ip saddr ${subnet} oifname != "${bridge}" masquerade`,
    '',
  ].join('\n');
}

/** Pods in their own network namespaces on a bridge, with NAT outwards and nftables isolation (root). */
export async function bridgeNetwork(options: NetworkOptions, reserved: readonly string[]): Promise<Network> {
  const bridge = options.bridge ?? 'ucompute0';
  const subnet = options.subnet ?? '10.89.0.0/16';
  const poolSize = options.poolSize ?? 8;
  const { table, prefix } = bridgeNames(bridge);
  const { base, prefix: bits } = parseSubnet(subnet);
  const gateway = ipOf(base + 1);
  const cidr = `${ipOf(base)}/${bits}`;
  const addresses = addressAllocator(base + 2, 2 ** (32 - bits) - 3);
  for (const ip of reserved) addresses.mark(ip);

  const exists = await readFile(`/sys/class/net/${bridge}/operstate`, 'utf8').then(
    () => true,
    () => false,
  );
  if (!exists) {
    await run(
      'ip',
      ['-batch', '-'],
      `link add ${bridge} type bridge\naddr add ${gateway}/${bits} dev ${bridge}\n`,
    );
  }
  await run('ip', ['link', 'set', bridge, 'up']);
  await writeFile('/proc/sys/net/ipv4/ip_forward', '1');
  await run('nft', ['-f', '-'], rulesScript(bridge, cidr, gateway));

  async function create(count: number): Promise<PodNetwork[]> {
    const made = Array.from({ length: count }, () => {
      const id = randomBytes(4).toString('hex').slice(0, 5);
      return { ip: addresses.take(), netns: `${prefix}${id}`, veth: `${prefix}${id}` };
    });
    const host = made.flatMap((n) => [
      `netns add ${n.netns}`,
      `link add ${n.veth} type veth peer name eth0 netns ${n.netns}`,
      `link set ${n.veth} master ${bridge} up`,
    ]);
    try {
      await run('ip', ['-batch', '-'], host.join('\n') + '\n');
      await Promise.all(
        made.map((n) =>
          run(
            'ip',
            ['-n', n.netns, '-batch', '-'],
            `link set lo up\naddr add ${n.ip}/${bits} dev eth0\nlink set eth0 up\nroute add default via ${gateway}\n`,
          ),
        ),
      );
      // Containers' root is root of their own user namespace only, which does not own the pod's
      // network namespace: low ports are open to every user of it, as Docker and containerd do.
      await Promise.all(
        made.map((n) =>
          run('ip', ['netns', 'exec', n.netns, 'sysctl', '-qw', 'net.ipv4.ip_unprivileged_port_start=0']),
        ),
      );
    } catch (error) {
      await Promise.all(made.map((n) => release(n, [])));
      throw error;
    }
    return made;
  }

  const pool: PodNetwork[] = [];
  let filling: Promise<void> | null = null;
  let closed = false;
  function refill() {
    if (filling || closed || poolSize === 0) return;
    filling = (async () => {
      while (!closed && pool.length < poolSize) pool.push(...(await create(poolSize - pool.length)));
    })()
      .catch(() => {
        // The next acquire creates its namespace directly and reports the error.
      })
      .finally(() => {
        filling = null;
      });
  }

  async function release(n: PodNetwork, peers: readonly string[]) {
    if (peers.length > 0) await changePeers(n.ip, peers, []);
    // The kernel removes the veth with the namespace, in the background: much cheaper than `ip link del`.
    if (n.netns) await run('ip', ['netns', 'del', n.netns]).catch(() => undefined);
    addresses.free(n.ip);
  }

  async function changePeers(ip: string, previous: readonly string[], next: readonly string[]) {
    // The pod's own address is never an element (its own traffic needs no rule).
    const removed = previous.filter((p) => !next.includes(p) && p !== ip);
    const added = next.filter((p) => !previous.includes(p) && p !== ip);
    const lines = [];
    // Adding then deleting makes the delete succeed even for elements already gone.
    if (removed.length > 0) {
      const elements = removed.map((p) => `${ip} . ${p}`).join(', ');
      lines.push(`add element bridge ${table} pairs { ${elements} }`);
      lines.push(`delete element bridge ${table} pairs { ${elements} }`);
    }
    if (added.length > 0) {
      lines.push(`add element bridge ${table} pairs { ${added.map((p) => `${ip} . ${p}`).join(', ')} }`);
    }
    if (lines.length > 0) await run('nft', ['-f', '-'], lines.join('\n') + '\n');
  }

  refill();
  return {
    description: `network: bridge ${bridge} ${cidr}, a namespace per pod, nftables isolation`,
    warnings: [],
    async acquire() {
      const ready = pool.shift();
      refill();
      if (ready) return ready;
      const [made] = await create(1);
      return made!;
    },
    allowPeers: (n, previous, next) => changePeers(n.ip, previous, next),
    release,
    enter: (n) => ['nsenter', `--net=/run/netns/${n.netns}`, '--'],
    async removeLeftovers(live) {
      await filling;
      const owned = new Set([...live, ...pool].flatMap((n) => [n.netns, n.veth]));
      const links = await run('ip', ['-o', 'link', 'show', 'master', bridge]);
      for (const match of links.matchAll(/^\d+: ([^@:]+)/gm)) {
        if (!owned.has(match[1]!)) await run('ip', ['link', 'del', match[1]!]).catch(() => undefined);
      }
      for (const line of (await run('ip', ['netns', 'list'])).split('\n')) {
        const name = line.split(' ')[0];
        if (name?.startsWith(prefix) && !owned.has(name)) await run('ip', ['netns', 'del', name]);
      }
    },
    async close() {
      closed = true;
      await filling;
      await Promise.all(pool.splice(0).map((n) => release(n, [])));
    },
  };
}

/** Without root: the host network, a loopback address per pod, nothing enforced. */
export function loopbackNetwork(reserved: readonly string[]): Network {
  // 127.0.0.0/8 is routed to lo on Linux, so every 127.x address works without configuration.
  const addresses = addressAllocator(127 * 2 ** 24 + 89 * 2 ** 16 + 2, 2 ** 16 - 3);
  for (const ip of reserved) addresses.mark(ip);
  return {
    description: 'network: host network, a loopback address per pod',
    warnings: [
      'pods share the host network: each has its own loopback address, but network isolation is not enforced',
    ],
    acquire: async () => ({ ip: addresses.take(), netns: null, veth: null }),
    allowPeers: async () => undefined,
    release: async (n) => {
      addresses.free(n.ip);
    },
    enter: () => [],
    removeLeftovers: async () => undefined,
    close: async () => undefined,
  };
}

/** Removes a bridge network entirely (its pods must be gone): for tests and uninstalling. */
export async function removeBridgeNetwork(bridge: string): Promise<void> {
  const { table } = bridgeNames(bridge);
  await run('ip', ['link', 'del', bridge]).catch(() => undefined);
  await run('nft', ['delete', 'table', 'bridge', table]).catch(() => undefined);
  await run('nft', ['delete', 'table', 'inet', table]).catch(() => undefined);
}
