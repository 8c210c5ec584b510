import type { KubernetesObjectApi } from '@kubernetes/client-node';
import { PatchStrategy } from '@kubernetes/client-node';
import { jobPods } from '../../plugins/connect-to-job.ts';
import type { NetworkPolicy, NetworkPolicyPeer, VolcanoJob } from '../../volcano/api/types.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PEERS_ANNOTATION } from '../../volcano/labels.ts';
import { JOB_TASK_NAME, networkPolicyName } from '../../volcano/names.ts';
import { statusCode } from './connection.ts';

/** Where a followed job's pods are: its namespace and its rank 0's address ('' until it has one). */
export interface PeerPod {
  namespace: string;
  ip: string;
}

interface Peer {
  hostname: string;
  jobId: string;
}

function peersOf(job: VolcanoJob): Peer[] {
  const recorded = job.metadata.annotations?.[PEERS_ANNOTATION];
  if (recorded === undefined) return [];
  const parsed: unknown = JSON.parse(recorded);
  return Array.isArray(parsed) ? (parsed as Peer[]) : [];
}

/**
 * The Volcano Job with host aliases to the peers whose rank 0 has an address by now (the build
 * could only add those known when it was made). The build itself is left as it is.
 */
export function addPeerAliases(job: VolcanoJob, locate: (jobId: string) => PeerPod | undefined): VolcanoJob {
  const peers = peersOf(job);
  if (peers.length === 0) return job;
  const copy = structuredClone(job);
  const spec = copy.spec.tasks.find((t) => t.name === JOB_TASK_NAME)?.template.spec;
  if (!spec) return job;
  const aliases = spec.hostAliases ?? [];
  for (const peer of peers) {
    const ip = locate(peer.jobId)?.ip;
    if (!ip || aliases.some((a) => a.hostnames.includes(peer.hostname))) continue;
    const entry = aliases.find((a) => a.ip === ip);
    if (entry) entry.hostnames.push(peer.hostname);
    else aliases.push({ ip, hostnames: [peer.hostname] });
  }
  if (aliases.length > 0) spec.hostAliases = aliases;
  return copy;
}

/** JSON with sorted keys: a rule read back from the server may list its fields in another order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const samePeer = (a: NetworkPolicyPeer, b: NetworkPolicyPeer) => canonical(a) === canonical(b);

/**
 * ConnectToJob's other half: each peer's own policy `policy-<peer>` gets a rule from and a rule
 * to this job's pods, so traffic flows both ways; a peer that had nothing to open has no policy
 * yet, and gets one with just these rules (labelled with the peer's job id, so it goes with the
 * peer). A peer that is gone is skipped; a rule already there is not added twice; a concurrent
 * change (409 on the resource version, or on creating the same policy) is retried.
 */
export async function openPeerPolicies(
  objects: KubernetesObjectApi,
  jobId: string,
  job: VolcanoJob,
  locate: (jobId: string) => PeerPod | undefined,
): Promise<void> {
  const namespace = job.metadata.namespace ?? '';
  for (const peer of peersOf(job)) {
    const where = locate(peer.jobId);
    if (!where) continue;
    const ours = jobPods(jobId, namespace, where.namespace);
    const name = networkPolicyName(peer.jobId);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await openPolicy(objects, peer.jobId, { name, namespace: where.namespace }, ours);
        break;
      } catch (e) {
        if (statusCode(e) === 404) break; // the peer's namespace is gone with it
        if (statusCode(e) !== 409 || attempt === 2) throw e;
      }
    }
  }
}

/** Adds the rules both ways for `ours` to the policy `at` of the peer `peerId`, creating it if absent. */
async function openPolicy(
  objects: KubernetesObjectApi,
  peerId: string,
  at: { name: string; namespace: string },
  ours: NetworkPolicyPeer,
): Promise<void> {
  const kind = { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' } as const;
  let policy: NetworkPolicy;
  try {
    policy = (await objects.read({ ...kind, metadata: at })) as unknown as NetworkPolicy;
  } catch (e) {
    if (statusCode(e) !== 404) throw e;
    const created: NetworkPolicy = {
      ...kind,
      metadata: { ...at, labels: { [JOB_ID_LABEL]: peerId, [MANAGED_BY_LABEL]: MANAGED_BY } },
      spec: {
        podSelector: jobPods(peerId, at.namespace, at.namespace).podSelector ?? {},
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{ from: [ours] }],
        egress: [{ to: [ours] }],
      },
    };
    await objects.create(created);
    return;
  }
  const ingress = policy.spec.ingress ?? [];
  const egress = policy.spec.egress ?? [];
  const hasIngress = ingress.some((r) => r.from?.some((p) => samePeer(p, ours)));
  const hasEgress = egress.some((r) => r.to?.some((p) => samePeer(p, ours)));
  if (hasIngress && hasEgress) return;
  await objects.patch(
    {
      ...kind,
      metadata: {
        ...at,
        resourceVersion: (policy.metadata as { resourceVersion?: string }).resourceVersion,
      },
      spec: {
        ingress: hasIngress ? ingress : [...ingress, { from: [ours] }],
        egress: hasEgress ? egress : [...egress, { to: [ours] }],
      },
    },
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
}
