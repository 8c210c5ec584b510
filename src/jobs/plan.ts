import type { KubernetesObject } from '../volcano/api/types.ts';
import { buildJob } from './job-management.ts';
import { type JobEnvironment, type JobIdentity, prepareJob } from './prepare.ts';

/**
 * The Kubernetes objects a job specification becomes, without running it: the Volcano Job first,
 * then its companions. Pure: no storage and no cluster is touched.
 */
export async function planJob(
  specification: unknown,
  identity: JobIdentity,
  env: JobEnvironment,
): Promise<KubernetesObject[]> {
  const job = prepareJob(specification, identity, env);
  const build = await buildJob(job, { config: env.config, peers: new Map() });
  return [build.volcanoJob, ...build.companions];
}
