import { isIPv4, isIPv6 } from 'node:net';
import { PRIVATE_RANGES } from '../../plugins/connect-to-job.ts';

/**
 * Destinations a pod never reaches unless `allowEgressTo` names them: private, link-local (cloud
 * metadata) and carrier-NAT ranges, as the Kubernetes backend's NetworkPolicy excepts them, plus
 * their IPv6 counterparts, loopback, multicast and reserved space.
 */
const BLOCKED_EGRESS = {
  ipv4: [...PRIVATE_RANGES, '0.0.0.0/8', '127.0.0.0/8', '224.0.0.0/3'],
  ipv6: ['::1/128', '::ffff:0:0/96', 'fc00::/7', 'fe80::/10', 'ff00::/8'],
};

/** Where pods may send traffic that leaves their bridge (the host itself is never one of them). */
export interface EgressPolicy {
  allowTo: readonly string[];
  allowInternet: boolean;
  /** The name servers in pods' resolv.conf: reachable on port 53 even in a blocked range. */
  nameservers: readonly string[];
}

/** Checks one `allowEgressTo` entry: an IPv4 or IPv6 address with an optional prefix length. */
export function checkCidr(cidr: string, index: number): void {
  const [address = '', prefix, ...rest] = cidr.split('/');
  const max = isIPv4(address) ? 32 : isIPv6(address) ? 128 : -1;
  const bits = prefix === undefined ? max : Number(prefix);
  if (max < 0 || rest.length > 0 || !/^\d*$/.test(prefix ?? '') || !(bits >= 0 && bits <= max)) {
    throw new Error(
      `local.network.allowEgressTo[${index}]: ${JSON.stringify(cidr)} is not an IPv4 or IPv6 CIDR`,
    );
  }
}

/** Names of nft objects, bridge ports and namespaces that belong to one bridge network. */
export function bridgeNames(bridge: string) {
  if (!/^[a-z][a-z0-9]{0,8}$/.test(bridge)) {
    throw new Error(`network bridge name ${bridge} must be 1-9 lowercase letters or digits`);
  }
  return { table: bridge, portPattern: `${bridge}-*`, prefix: `${bridge}-` };
}

/** The inet forward rules for traffic pods send beyond their bridge, in order. */
function egressRules(bridge: string, egress: EgressPolicy): string[] {
  const from = `iifname "${bridge}"`;
  const family = (cidrs: readonly string[]) => ({
    ipv4: cidrs.filter((c) => !c.includes(':')),
    ipv6: cidrs.filter((c) => c.includes(':')),
  });
  const allowed = family(egress.allowTo);
  const dns = family(egress.nameservers);
  // Between pods of the bridge the bridge table decides; with br_netfilter such traffic passes here too.
  const rules: string[] = [`${from} oifname "${bridge}" accept`];
  for (const ip of ['ipv4', 'ipv6'] as const) {
    const match = ip === 'ipv4' ? 'ip daddr' : 'ip6 daddr';
    if (allowed[ip].length > 0) rules.push(`${from} ${match} { ${allowed[ip].join(', ')} } accept`);
    if (dns[ip].length > 0) {
      rules.push(`${from} ${match} { ${dns[ip].join(', ')} } meta l4proto { tcp, udp } th dport 53 accept`);
    }
  }
  if (egress.allowInternet) {
    rules.push(`${from} ip daddr { ${BLOCKED_EGRESS.ipv4.join(', ')} } drop`);
    rules.push(`${from} ip6 daddr { ${BLOCKED_EGRESS.ipv6.join(', ')} } drop`);
  }
  rules.push(`${from} ${egress.allowInternet ? 'accept' : 'drop'}`);
  return rules;
}

/** Shell-free nft script that creates (or refreshes) the rules; set elements of live pods survive. */
export function rulesScript(bridge: string, subnet: string, gateway: string, egress: EgressPolicy): string {
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
    // Pods reach the internet, never private or link-local ranges, unless the operator allows them.
    ...egressRules(bridge, egress).map((rule) => `add rule inet ${table} forward ${rule}`),
    `add rule inet ${table} forward oifname "${bridge}" ct state established,related accept`,
    `add rule inet ${table} forward oifname "${bridge}" drop`,
    `add rule inet ${table} postrouting ip saddr ${subnet} oifname != "${bridge}" masquerade`,
    '',
  ].join('\n');
}
