import type { ResolvedPipelineConfig } from '../model/config.ts';
import { accountOf, type Owner } from '../model/owner.ts';
import {
  FAIR_SHARE_WEIGHT_ANNOTATION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  POD_SECURITY_ENFORCE_LABEL,
} from '../volcano/labels.ts';
import { ownerNamespace } from '../volcano/names.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

export function fairShareWeight(config: ResolvedPipelineConfig, owner: Owner): number {
  return config.fairShare.weights[accountOf(owner)] ?? config.fairShare.defaultWeight;
}

/**
 * FairShare: every owner (user or project) gets a namespace of its own, created as needed, and a
 * Volcano queue of the same name whose weight is the owner's share: Volcano's proportion plugin
 * then divides the cluster between owners by weight (namespace-level fair share is gone from
 * Volcano; a queue per tenant is its replacement). With the `single` strategy every job shares
 * the configured namespace and queue. The cluster enforces on an owner's namespace the Pod
 * Security profile the plugins emit: "restricted", or "baseline" where the operator allows root
 * apps (security.allowRootApps).
 */
export const fairSharePlugin: JobPlugin = {
  name: 'FairShare',
  onCreate(ctx, job, build) {
    const weight = fairShareWeight(ctx.config, job.owner);
    annotateJob(build, FAIR_SHARE_WEIGHT_ANNOTATION, String(weight));
    if (ctx.config.kubernetes.namespaceStrategy === 'single') return;

    const name = ownerNamespace(ctx.config, job.owner);
    const labels = { [MANAGED_BY_LABEL]: MANAGED_BY };
    build.volcanoJob.metadata.namespace = name;
    build.volcanoJob.spec.queue = name;
    build.companions.push(
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name,
          labels: {
            ...labels,
            [POD_SECURITY_ENFORCE_LABEL]: ctx.config.security.allowRootApps ? 'baseline' : 'restricted',
          },
        },
      },
      {
        apiVersion: 'scheduling.volcano.sh/v1beta1',
        kind: 'Queue',
        metadata: { name, labels },
        spec: { weight, reclaimable: true },
      },
    );
  },
};
