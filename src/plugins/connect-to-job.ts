import type { NetworkPolicy, NetworkPolicyPeer } from '../volcano/api/types.ts';
import { VOLCANO_JOB_NAME_LABEL } from '../volcano/emulation/conventions.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PEERS_ANNOTATION } from '../volcano/labels.ts';
import { networkPolicyName, volcanoJobName } from '../volcano/names.ts';
import { annotateJob, podSpec } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/** Address ranges a job may not reach on the internet side: private, link-local and carrier NAT. */
export const PRIVATE_RANGES = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  '100.64.0.0/10',
];

const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** Pods of one job, as seen from a policy in `fromNamespace`. */
export function jobPods(jobId: string, namespace: string, fromNamespace: string): NetworkPolicyPeer {
  const podSelector = { matchLabels: { [VOLCANO_JOB_NAME_LABEL]: volcanoJobName(jobId) } };
  return namespace === fromNamespace
    ? { podSelector }
    : { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: namespace } }, podSelector };
}

/**
 * ConnectToJob: by default a job talks only to its own replicas (plus DNS, the session proxy and,
 * if allowed, the public internet). Each peer adds a rule both ways in the NetworkPolicy
 * `policy-<jobId>` and a host alias from the peer's host name to its rank 0, once its address is
 * known. The peers are recorded on the job so that the backend can open their policies in turn.
 */
export const connectToJobPlugin: JobPlugin = {
  name: 'ConnectToJob',
  onCreate(ctx, job, build) {
    const namespace = build.volcanoJob.metadata.namespace ?? ctx.config.kubernetes.namespace;
    const own = () => jobPods(job.id, namespace, namespace);
    const peers = job.parameters.peers.map((peer) => {
      const location = ctx.peers.get(peer.jobId);
      return { ...peer, namespace: location?.namespace ?? namespace, address: location?.address };
    });
    const proxy: NetworkPolicyPeer = {
      namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: ctx.config.kubernetes.serviceNamespace } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ucompute' } },
    };
    const peerPods = () => peers.map((p) => jobPods(p.jobId, p.namespace, namespace));

    const egress: NonNullable<NetworkPolicy['spec']['egress']> = [
      { to: [own(), ...peerPods()] },
      {
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
    ];
    if (ctx.config.kubernetes.allowInternet) {
      egress.push({ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: PRIVATE_RANGES } }] });
    }
    build.companions.push({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: networkPolicyName(job.id),
        namespace,
        labels: { [JOB_ID_LABEL]: job.id, [MANAGED_BY_LABEL]: MANAGED_BY },
      },
      spec: {
        podSelector: own().podSelector ?? {},
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{ from: [own(), proxy, ...peerPods()] }],
        egress,
      },
    });

    if (peers.length === 0) return;
    annotateJob(
      build,
      PEERS_ANNOTATION,
      JSON.stringify(peers.map(({ hostname, jobId }) => ({ hostname, jobId }))),
    );
    // hostAliases is a list-map keyed by ip: one peer job named by two host names is one entry.
    const aliases = new Map<string, string[]>();
    for (const p of peers) {
      if (p.address) aliases.set(p.address, [...(aliases.get(p.address) ?? []), p.hostname]);
    }
    if (aliases.size > 0) {
      podSpec(build).hostAliases = [...aliases].map(([ip, hostnames]) => ({ ip, hostnames }));
    }
  },
};
