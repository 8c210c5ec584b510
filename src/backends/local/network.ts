import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { run } from './exec.ts';
import { namespaceJournal } from './namespace-journal.ts';
import { bridgeNames, checkCidr, type EgressPolicy, rulesScript } from './network-rules.ts';
import { PERL, programPath } from './programs.ts';

/** A pod's network identity. */
export interface PodNetwork {
  ip: string;
  /** Network namespace name (under /run/netns); null on the host network. */
  netns: string | null;
  /** Host end of the pod's veth; null on the host network. */
  veth: string | null;
}

export interface NetworkOptions {
  /**
   * Bridge name, at most 9 characters: veths and namespaces are named `<bridge>-<id>`, nftables
   * tables `<bridge>`. Default: the instance's own (see host-names.ts).
   */
  bridge?: string;
  /** An IPv4 /16 ... /24 subnet; the bridge takes its first address. Default: the instance's own. */
  subnet?: string;
  /** Namespaces kept ready for new pods, created in the background. Default 8. */
  poolSize?: number;
  /** Destinations (IPv4 or IPv6 CIDRs) pods may reach although they are private or link-local. */
  allowEgressTo?: readonly string[];
  /** Whether pods reach public addresses (through NAT). Default true. */
  allowInternet?: boolean;
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
  /** The file that opens the pod's network namespace (for setns); null: the host's network. */
  namespaceFile(network: PodNetwork): string | null;
  /** Removes the namespaces this instance created that no live pod owns (a crashed process's). */
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

/** Pods in their own network namespaces on a bridge, with NAT outwards and nftables isolation (root). */
export async function bridgeNetwork(
  options: NetworkOptions & { bridge: string; subnet: string },
  machine: {
    /** The file that records the namespaces this instance created (see namespace-journal.ts). */
    journal: string;
    /** Addresses pods of an earlier process still hold. */
    reserved: readonly string[];
    /** The name servers of pods' resolv.conf. */
    nameservers: readonly string[];
    /** Runs `ip` and `nft` (the runtime's launcher: never a fork of ucompute itself). */
    run: typeof run;
    /** setns's system call number, for programs/configure-netns.pl. */
    setns: number;
  },
): Promise<Network> {
  const { reserved, nameservers } = machine;
  const { bridge, subnet } = options;
  const egress: EgressPolicy = {
    allowTo: options.allowEgressTo ?? [],
    allowInternet: options.allowInternet ?? true,
    nameservers,
  };
  egress.allowTo.forEach(checkCidr);
  const poolSize = options.poolSize ?? 8;
  const { table, prefix } = bridgeNames(bridge);
  const journal = namespaceJournal(machine.journal);
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
    await machine.run(
      'ip',
      ['-batch', '-'],
      `link add ${bridge} type bridge\naddr add ${gateway}/${bits} dev ${bridge}\n`,
    );
  }
  await machine.run('ip', ['link', 'set', bridge, 'up']);
  await writeFile('/proc/sys/net/ipv4/ip_forward', '1');
  await machine.run('nft', ['-f', '-'], rulesScript(bridge, cidr, gateway, egress));

  /**
   * Names handed out and not yet deleted. A name is also never one the machine still has: a
   * namespace an earlier process left, or the veth of one deleted lately (the kernel removes it in
   * the background). A name taken twice failed the whole batch of `ip` lines ("File exists").
   */
  const named = new Set<string>();
  function freshName(): string {
    // Bounded: 16^5 names, of which this instance holds at most its pods and pool.
    for (let attempt = 0; attempt < 1000; attempt++) {
      const name = `${prefix}${randomBytes(4).toString('hex').slice(0, 5)}`;
      if (named.has(name) || existsSync(`/run/netns/${name}`) || existsSync(`/sys/class/net/${name}`))
        continue;
      named.add(name);
      return name;
    }
    throw new Error(`no free network namespace name under ${prefix} after 1000 tries`);
  }

  async function create(count: number): Promise<PodNetwork[]> {
    const made = Array.from({ length: count }, () => {
      const name = freshName();
      return { ip: addresses.take(), netns: name, veth: name };
    });
    // The host ends get no IPv6 link-local address (addrgenmode none): a bridge port needs none,
    // and each address added or removed on the host is a network change to the browsers there —
    // Chromium fails every request in flight with ERR_NETWORK_CHANGED — so a researcher's open
    // Jupyter or desktop would break whenever another pod started or ended.
    const host = made.flatMap((n) => [
      `netns add ${n.netns}`,
      `link add ${n.veth} type veth peer name eth0 netns ${n.netns}`,
      `link set ${n.veth} addrgenmode none master ${bridge} up`,
    ]);
    try {
      await journal.created(made.map((n) => n.netns));
      await machine.run('ip', ['-batch', '-'], host.join('\n') + '\n');
      // Configured from the inside, one process for the whole batch (see configure-netns.pl).
      await machine.run(PERL, [
        programPath('configure-netns.pl'),
        String(machine.setns),
        ...made.flatMap((n) => [
          n.netns,
          `link set lo up\naddr add ${n.ip}/${bits} dev eth0\nlink set eth0 up\nroute add default via ${gateway}\n`,
        ]),
      ]);
    } catch (error) {
      await Promise.all(made.map((n) => release(n, [])));
      throw error;
    }
    return made;
  }

  const pool: PodNetwork[] = [];
  let filling: Promise<void> | null = null;
  let closed = false;
  /**
   * Refilled once half of it is taken, not after each acquire: one `ip` run and one configuring
   * process then serve several pods instead of one each (processes are what a pod's start costs).
   */
  function refill() {
    if (filling || closed || poolSize === 0 || pool.length > Math.floor(poolSize / 2)) return;
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
    if (n.netns) await deleteNamespace(n.netns);
    addresses.free(n.ip);
  }

  /**
   * With the pool empty, pods that ask while one batch is being created are made together in the
   * next: under load one `ip` run serves many pods.
   */
  let waiting: { resolve(n: PodNetwork): void; reject(e: unknown): void }[] = [];
  let nextCreation: Promise<void> | null = null;
  let lastCreation: Promise<void> = Promise.resolve();
  function createForWaiting(): Promise<PodNetwork> {
    const made = new Promise<PodNetwork>((resolve, reject) => waiting.push({ resolve, reject }));
    nextCreation ??= lastCreation.then(async () => {
      const batch = waiting;
      waiting = [];
      nextCreation = null;
      try {
        const networks = await create(batch.length);
        for (const [i, w] of batch.entries()) w.resolve(networks[i]!);
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    });
    lastCreation = nextCreation;
    return made;
  }

  /**
   * Namespaces wait while one `ip` run deletes the previous ones, then go together in the next:
   * when many pods end at once, one process serves them all. Errors (already gone) are ignored.
   */
  let doomed: string[] = [];
  let nextDeletion: Promise<void> | null = null;
  let lastDeletion: Promise<void> = Promise.resolve();
  function deleteNamespace(name: string): Promise<void> {
    doomed.push(name);
    nextDeletion ??= lastDeletion.then(async () => {
      const batch = doomed;
      doomed = [];
      nextDeletion = null;
      const script = batch.map((netns) => `netns del ${netns}`).join('\n');
      await machine.run('ip', ['-force', '-batch', '-'], `${script}\n`).catch(() => undefined);
      await journal.deleted(batch).catch(() => undefined);
      for (const netns of batch) named.delete(netns);
    });
    lastDeletion = nextDeletion;
    return nextDeletion;
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
    if (lines.length > 0) await machine.run('nft', ['-f', '-'], lines.join('\n') + '\n');
  }

  refill();
  return {
    description: `network: bridge ${bridge} ${cidr}, a namespace per pod, nftables isolation, egress to ${
      egress.allowInternet ? 'the internet' : 'nothing'
    }${egress.allowTo.length > 0 ? ` and ${egress.allowTo.join(', ')}` : ''}`,
    warnings: [],
    async acquire() {
      const ready = pool.shift();
      refill();
      return ready ?? createForWaiting();
    },
    allowPeers: (n, previous, next) => changePeers(n.ip, previous, next),
    release,
    namespaceFile: (n) => `/run/netns/${n.netns}`,
    async removeLeftovers(live) {
      await filling;
      const owned = [...live, ...pool].flatMap((n) => (n.netns ? [n.netns] : []));
      const leftovers = [...(await journal.outstanding())].filter((name) => !owned.includes(name));
      const script = leftovers.map((netns) => `netns del ${netns}`).join('\n');
      // Already gone is fine: the kernel forgets namespaces at reboot, the journal does not.
      if (leftovers.length > 0)
        await machine.run('ip', ['-force', '-batch', '-'], `${script}\n`).catch(() => undefined);
      await journal.compact(owned);
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
    namespaceFile: () => null,
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
