import type { ResolvedPipelineConfig } from '../model/config.ts';
import type { NetworkPolicy, NetworkPolicyPeer } from '../volcano/api/types.ts';
import { VOLCANO_JOB_NAME_LABEL } from '../volcano/emulation/conventions.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PEERS_ANNOTATION } from '../volcano/labels.ts';
import { JOB_ISOLATION_POLICY, networkPolicyName, volcanoJobName } from '../volcano/names.ts';
import { annotateJob, podSpec } from './builder.ts';
import type { JobBuild, JobPlugin } from './plugin.ts';

/** Address ranges a job may not reach on the internet side: private, link-local and carrier NAT. */
export const PRIVATE_RANGES = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  '100.64.0.0/10',
];

const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** Every job pod of ucompute in `namespace` (the pod template's label), none of anyone else's. */
const JOB_POD_SELECTOR = { matchLabels: { [MANAGED_BY_LABEL]: MANAGED_BY } };

/**
 * The namespace's isolation policy (see ConnectToJob): shared by its jobs, so it carries no job
 * id and no job's removal deletes it.
 */
function isolationPolicy(config: ResolvedPipelineConfig, namespace: string): NetworkPolicy {
  const proxy: NetworkPolicyPeer = {
    namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: config.kubernetes.serviceNamespace } },
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ucompute' } },
  };
  const egress: NonNullable<NetworkPolicy['spec']['egress']> = [
    {
      ports: [
        { protocol: 'UDP', port: 53 },
        { protocol: 'TCP', port: 53 },
      ],
    },
  ];
  if (config.kubernetes.allowInternet) {
    egress.push({ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: PRIVATE_RANGES } }] });
  }
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: JOB_ISOLATION_POLICY, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
    spec: {
      podSelector: JOB_POD_SELECTOR,
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [proxy] }],
      egress,
    },
  };
}

/** Pods of one job, as seen from a policy in `fromNamespace`. */
export function jobPods(jobId: string, namespace: string, fromNamespace: string): NetworkPolicyPeer {
  const podSelector = { matchLabels: { [VOLCANO_JOB_NAME_LABEL]: volcanoJobName(jobId) } };
  return namespace === fromNamespace
    ? { podSelector }
    : { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: namespace } }, podSelector };
}

/**
 * The job's own NetworkPolicy `policy-<jobId>`, added empty if the build has none yet: what it
 * opens comes on top of the namespace's isolation policy (policies add up).
 */
export function jobPolicy(build: JobBuild, jobId: string, namespace: string): NetworkPolicy {
  const name = networkPolicyName(jobId);
  const existing = build.companions.find(
    (c): c is NetworkPolicy => c.kind === 'NetworkPolicy' && c.metadata.name === name,
  );
  if (existing) return existing;
  const policy: NetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace, labels: { [JOB_ID_LABEL]: jobId, [MANAGED_BY_LABEL]: MANAGED_BY } },
    spec: {
      podSelector: jobPods(jobId, namespace, namespace).podSelector ?? {},
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
  build.companions.push(policy);
  return policy;
}

/**
 * ConnectToJob: by default a job talks only to its own replicas (plus DNS, the session proxy and,
 * if allowed, the public internet). One policy per job namespace, `job-isolation`, shared by all
 * jobs there and created with the namespace, selects every job pod of ucompute and allows only
 * the proxy in and DNS (and the internet) out: a pod is isolated from its first moment, whoever
 * creates what when. What a job needs beyond that is its own policy `policy-<jobId>`, made only
 * when there is something to open: its replicas to each other (a pod always reaches itself), and
 * each peer both ways, with a host alias from the peer's host name to its rank 0 once its address
 * is known. The peers are recorded on the job so that the backend can open their policies in turn.
 */
export const connectToJobPlugin: JobPlugin = {
  name: 'ConnectToJob',
  onCreate(ctx, job, build) {
    const namespace = build.volcanoJob.metadata.namespace ?? ctx.config.kubernetes.namespace;
    const peers = job.parameters.peers.map((peer) => {
      const location = ctx.peers.get(peer.jobId);
      return { ...peer, namespace: location?.namespace ?? namespace, address: location?.address };
    });
    build.companions.push(isolationPolicy(ctx.config, namespace));
    const opened = [
      ...(job.replicas > 1 ? [jobPods(job.id, namespace, namespace)] : []),
      ...peers.map((p) => jobPods(p.jobId, p.namespace, namespace)),
    ];
    if (opened.length > 0) {
      const policy = jobPolicy(build, job.id, namespace);
      policy.spec.ingress?.push({ from: opened });
      policy.spec.egress?.push({ to: opened });
    }

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
