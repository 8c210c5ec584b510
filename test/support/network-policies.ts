/**
 * Which connections a set of Kubernetes NetworkPolicies allows, by the API's documented semantics
 * (networking.k8s.io/v1): a pod selected by no policy of a direction is open in that direction;
 * one selected by some is open only to what at least one of their rules allows (policies add up);
 * a connection needs the sender's egress and the receiver's ingress; a pod always reaches itself.
 * The cluster harness has no network plugin to enforce policies (KWOK's pods run nothing), so the
 * isolation tests judge the policies the API server holds with this instead. Only what ucompute
 * sends is understood: matchLabels selectors (matchExpressions are refused), TCP/UDP ports by
 * number, ipBlocks for addresses outside the pods.
 */
import { BlockList, isIPv4 } from 'node:net';

type Labels = Record<string, string>;
interface Selector {
  matchLabels?: Labels;
  matchExpressions?: unknown[];
}
interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface Port {
  protocol?: string;
  port?: number | string;
}
export interface Policy {
  metadata: { name: string; namespace?: string; creationTimestamp?: string };
  spec: {
    podSelector: Selector;
    policyTypes?: string[];
    ingress?: { from?: Peer[]; ports?: Port[] }[];
    egress?: { to?: Peer[]; ports?: Port[] }[];
  };
}

/** A pod (its namespace and labels), or an address outside the cluster's pods. */
export type Endpoint = { pod: string; namespace: string; labels: Labels } | { ip: string };

/** What the policies are judged against: the namespaces' labels, by name. */
export interface World {
  policies: readonly Policy[];
  namespaces: ReadonlyMap<string, Labels>;
}

function matches(selector: Selector | undefined, labels: Labels): boolean {
  if (selector?.matchExpressions?.length) throw new Error('matchExpressions are not understood here');
  return Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

function inBlock(ip: string, block: NonNullable<Peer['ipBlock']>): boolean {
  const list = (cidrs: string[]) => {
    const l = new BlockList();
    for (const cidr of cidrs) {
      const [address = '', prefix = '32'] = cidr.split('/');
      l.addSubnet(address, Number(prefix), isIPv4(address) ? 'ipv4' : 'ipv6');
    }
    return l;
  };
  const type = isIPv4(ip) ? 'ipv4' : 'ipv6';
  return list([block.cidr]).check(ip, type) && !list(block.except ?? []).check(ip, type);
}

/** Whether `peer`, in a rule of a policy in `namespace`, names `endpoint`. */
function names(world: World, peer: Peer, namespace: string, endpoint: Endpoint): boolean {
  if (peer.ipBlock) return 'ip' in endpoint && inBlock(endpoint.ip, peer.ipBlock);
  if (!('pod' in endpoint)) return false;
  const namespaceLabels = world.namespaces.get(endpoint.namespace) ?? {};
  const inNamespace = peer.namespaceSelector
    ? matches(peer.namespaceSelector, namespaceLabels)
    : endpoint.namespace === namespace;
  return inNamespace && matches(peer.podSelector, endpoint.labels);
}

type Direction = 'Ingress' | 'Egress';
type PortUsed = { protocol: 'TCP' | 'UDP'; port: number };

function portMatches(ports: Port[] | undefined, port: PortUsed): boolean {
  if (!ports || ports.length === 0) return true;
  return ports.some(
    (p) => (p.protocol ?? 'TCP') === port.protocol && (p.port === undefined || Number(p.port) === port.port),
  );
}

const types = (policy: Policy) =>
  policy.spec.policyTypes ?? ['Ingress', ...(policy.spec.egress ? ['Egress'] : [])];

/** The policies that select `pod` for `direction` (an empty list: the pod is open that way). */
export function selecting(world: World, pod: Pod, direction: Direction): Policy[] {
  return world.policies.filter(
    (p) =>
      p.metadata.namespace === pod.namespace &&
      types(p).includes(direction) &&
      matches(p.spec.podSelector, pod.labels),
  );
}

type Pod = Extract<Endpoint, { pod: string }>;

/** Whether `pod`'s policies of `direction` let it talk with `other` (a pod selected by none: yes). */
function admits(world: World, pod: Pod, direction: Direction, other: Endpoint, port: PortUsed): boolean {
  const policies = selecting(world, pod, direction);
  return (
    policies.length === 0 ||
    policies.some((policy) =>
      (direction === 'Ingress'
        ? (policy.spec.ingress ?? []).map((r) => ({ ports: r.ports, peers: r.from ?? [] }))
        : (policy.spec.egress ?? []).map((r) => ({ ports: r.ports, peers: r.to ?? [] }))
      ).some(
        (rule) =>
          portMatches(rule.ports, port) &&
          (rule.peers.length === 0 || rule.peers.some((peer) => names(world, peer, pod.namespace, other))),
      ),
    )
  );
}

/** Whether `from` may open a connection to `to` on the port given. */
export function allowed(world: World, from: Endpoint, to: Endpoint, port: PortUsed): boolean {
  if ('pod' in from && 'pod' in to && from.pod === to.pod && from.namespace === to.namespace) return true;
  return (
    (!('pod' in from) || admits(world, from, 'Egress', to, port)) &&
    (!('pod' in to) || admits(world, to, 'Ingress', from, port))
  );
}
