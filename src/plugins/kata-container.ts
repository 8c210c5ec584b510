import { podSpec } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/** KataContainer: products that ask for a runtime class (e.g. `kata`) run their pods in it. */
export const kataContainerPlugin: JobPlugin = {
  name: 'KataContainer',
  onCreate(_ctx, job, build) {
    if (job.product.runtimeClass !== undefined) podSpec(build).runtimeClassName = job.product.runtimeClass;
  },
};
