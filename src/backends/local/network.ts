import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { run } from './exec.ts';
import { namespaceJournal } from './namespace-journal.ts';
import { addressAllocator, ipOf, parseSubnet } from './network-addresses.ts';
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
  /**
   * A network identity for a new pod: a new namespace, or an ended pod's that nothing was left in,
   * reset (see `release`).
   */
  acquire(): Promise<PodNetwork>;
  /** Replaces the peers `network` may exchange traffic with. */
  allowPeers(network: PodNetwork, previous: readonly string[], next: readonly string[]): Promise<void>;
  /**
   * Takes back the network of a pod whose processes are all gone: its rules are removed, and its
   * namespace is then (not waited for) reset for a later pod — its address, routes and neighbours
   * replaced — when no process, socket or conntrack entry is left in it, else deleted with its
   * veth. Idempotent.
   */
  release(network: PodNetwork, peers: readonly string[]): Promise<void>;
  /** The file that opens the pod's network namespace (for setns); null: the host's network. */
  namespaceFile(network: PodNetwork): string | null;
  /** Removes the namespaces this instance created that no live pod owns (a crashed process's). */
  removeLeftovers(live: readonly PodNetwork[]): Promise<void>;
  /** Destroys the ready pool; pods keep their networks. */
  close(): Promise<void>;
}

/**
 * Most namespaces of ended pods kept for later ones (beyond, they are deleted): about what a burst
 * of short jobs ends and starts at once on a small machine. Each holds an address, so at most an
 * eighth of the subnet's.
 */
const REUSED_KEPT = 64;

/** A pod waiting for its network. */
interface Waiter {
  resolve(network: PodNetwork): void;
  reject(error: unknown): void;
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
  const addressCount = 2 ** (32 - bits) - 3;
  const addresses = addressAllocator(base + 2, addressCount);
  const keptAtMost = Math.min(REUSED_KEPT, Math.floor(addressCount / 8));
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

  /**
   * Runs programs/configure-netns.pl on namespaces, new and reused; answers the reused ones it
   * left alone because something of their previous pod is still in them.
   */
  async function configure(batch: { network: PodNetwork; reused: boolean }[]) {
    if (batch.length === 0) return new Set<string>();
    const out = await machine.run(PERL, [
      programPath('configure-netns.pl'),
      String(machine.setns),
      gateway,
      ...batch.flatMap((b) => [b.network.netns!, b.reused ? 'reused' : 'new', `${b.network.ip}/${bits}`]),
    ]);
    return new Set(out.split('\n').filter((name) => name !== ''));
  }

  /**
   * The host's part of making namespaces (the namespace, the veth pair, the bridge port), one
   * batch after the other: the kernel makes them one at a time anyway. Configuring a batch inside
   * its namespaces goes on beside the next batch's host part.
   */
  let hostTurn: Promise<void> = Promise.resolve();
  async function create(count: number): Promise<PodNetwork[]> {
    if (count === 0) return [];
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
    const hostPart = hostTurn.then(async () => {
      await journal.created(made.map((n) => n.netns));
      await machine.run('ip', ['-batch', '-'], host.join('\n') + '\n');
    });
    hostTurn = hostPart.catch(() => undefined);
    try {
      await hostPart;
      // Configured from the inside, one process for the whole batch (see configure-netns.pl).
      await configure(made.map((network) => ({ network, reused: false })));
    } catch (error) {
      await Promise.all(made.map(discard));
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
   * Namespaces being reset for reuse count as the pool's.
   */
  function refill() {
    const coming = pool.length + recycling.length + resetting;
    if (filling || closed || poolSize === 0 || coming > Math.floor(poolSize / 2)) return;
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

  /** Deletes a namespace (and its veth with it) and frees its address. */
  async function discard(n: PodNetwork) {
    if (n.netns) await deleteNamespace(n.netns);
    addresses.free(n.ip);
  }

  async function release(n: PodNetwork, peers: readonly string[]) {
    if (peers.length > 0) await changePeers(n.ip, peers, []);
    if (closed || pool.length + recycling.length + resetting >= keptAtMost) await discard(n);
    // Not waited for: the pod is gone, and its namespace is no one's until a reset hands it out.
    else void recycle(n);
  }

  /**
   * Ended pods' namespaces are reset together, one batch after the other (one configuring process
   * for all that ended meanwhile), each with a new address for the pod that takes it. Pods waiting
   * for a namespace take them first, the pool the rest; one something was left in is deleted.
   * Never rejects.
   */
  let recycling: PodNetwork[] = [];
  let resetting = 0;
  /** Pods waiting for a namespace being reset: never more than are being reset or queued for it. */
  const forReset: Waiter[] = [];
  const hand = (network: PodNetwork) => {
    const waiter = forReset.shift() ?? waiting.shift();
    if (waiter) waiter.resolve(network);
    else pool.push(network);
  };
  let nextReset: Promise<void> | null = null;
  let lastReset: Promise<void> = Promise.resolve();
  function recycle(n: PodNetwork): Promise<void> {
    recycling.push(n);
    nextReset ??= lastReset.then(async () => {
      const ended = recycling;
      recycling = [];
      nextReset = null;
      resetting = ended.length;
      for (const old of ended) addresses.free(old.ip);
      const renewed = ended.map((old) => ({ ...old, ip: addresses.take() }));
      try {
        // Reset as configure-netns.pl says: what the ended pod left that a container cannot change
        // itself (it never holds CAP_NET_ADMIN there) goes, and the new pod's address is set.
        const left = await configure(renewed.map((network) => ({ network, reused: true })));
        const dropped = [];
        for (const network of renewed) {
          if (left.has(network.netns!) || closed) dropped.push(discard(network));
          else hand(network);
        }
        await Promise.all(dropped);
      } catch {
        // Reset or not, they are not trusted: deleted as any namespace.
        await Promise.all(renewed.map(discard));
      } finally {
        resetting = 0;
        // Those more than the next reset brings get new namespaces.
        while (forReset.length > recycling.length) {
          const waiter = forReset.pop()!;
          createForWaiting().then(waiter.resolve, waiter.reject);
        }
      }
    });
    lastReset = nextReset;
    return nextReset;
  }

  /**
   * With the pool empty, pods that ask while one batch is being created are made together in the
   * next: under load one `ip` run serves many pods.
   */
  let waiting: Waiter[] = [];
  let nextCreation: Promise<void> | null = null;
  function createForWaiting(): Promise<PodNetwork> {
    const made = new Promise<PodNetwork>((resolve, reject) => waiting.push({ resolve, reject }));
    if (nextCreation) return made;
    nextCreation = hostTurn.then(async () => {
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
      if (ready) return ready;
      // A namespace being reset comes sooner, and costs less, than a new one.
      if (forReset.length < recycling.length + resetting)
        return new Promise<PodNetwork>((resolve, reject) => forReset.push({ resolve, reject }));
      return createForWaiting();
    },
    allowPeers: (n, previous, next) => changePeers(n.ip, previous, next),
    release,
    namespaceFile: (n) => `/run/netns/${n.netns}`,
    async removeLeftovers(live) {
      await filling;
      await lastReset;
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
      await lastReset;
      await Promise.all(pool.splice(0).map(discard));
    },
  };
}

/** Removes a bridge network entirely (its pods must be gone): for tests and uninstalling. */
export async function removeBridgeNetwork(bridge: string): Promise<void> {
  const { table } = bridgeNames(bridge);
  await run('ip', ['link', 'del', bridge]).catch(() => undefined);
  await run('nft', ['delete', 'table', 'bridge', table]).catch(() => undefined);
  await run('nft', ['delete', 'table', 'inet', table]).catch(() => undefined);
}
