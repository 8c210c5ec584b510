import { EGRESS_BANDWIDTH_ANNOTATION, INGRESS_BANDWIDTH_ANNOTATION } from '../volcano/labels.ts';
import { annotatePods } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/** NetworkLimit: products may cap bandwidth; the CNI bandwidth plugin reads these pod annotations. */
export const networkLimitPlugin: JobPlugin = {
  name: 'NetworkLimit',
  onCreate(_ctx, job, build) {
    const limits = job.product.networkBandwidth;
    if (limits?.ingress !== undefined) annotatePods(build, INGRESS_BANDWIDTH_ANNOTATION, limits.ingress);
    if (limits?.egress !== undefined) annotatePods(build, EGRESS_BANDWIDTH_ANNOTATION, limits.egress);
  },
};
