import type { VolcanoJob } from '../../api/types.ts';
import { podName } from '../conventions.ts';
import { envPlugin } from './env.ts';
import { mpiPlugin } from './mpi.ts';
import type { JobPlugin, PluginBuilder, PluginState, PodPlan } from './plugin.ts';
import { sshPlugin } from './ssh.ts';
import { svcPlugin } from './svc.ts';

/**
 * Volcano's job plugins as a runtime without Kubernetes applies them (Volcano's plugins/factory.go):
 * each registered by name, applied in this order to the jobs that ask for it.
 */
const PLUGINS: Record<string, PluginBuilder> = {
  env: envPlugin,
  svc: svcPlugin,
  ssh: sshPlugin,
  mpi: mpiPlugin,
};

/** The plugins a job asks for, with admission's defaults; an unknown plugin is an error naming it. */
export function jobPlugins(job: VolcanoJob): Record<string, string[]> {
  const plugins = { ...(job.spec.plugins ?? {}) };
  for (const name of Object.keys(plugins)) {
    if (!Object.hasOwn(PLUGINS, name)) {
      throw new Error(
        `spec.plugins.${name}: the local backend applies the ${Object.keys(PLUGINS).join(', ')} plugins, not ${name}`,
      );
    }
  }
  // Volcano's admission adds svc and ssh to a job with mpi.
  if (plugins.mpi !== undefined) {
    plugins.svc ??= [];
    plugins.ssh ??= [];
  }
  return plugins;
}

/** The job's plugins, made from their arguments, in registration order. */
function pluginsOf(job: VolcanoJob): JobPlugin[] {
  const asked = jobPlugins(job);
  return Object.entries(PLUGINS).flatMap(([name, build]) => {
    const args = asked[name];
    return args !== undefined ? [build(args)] : [];
  });
}

/** OnJobAdd of every plugin of the job: once per job, and again after a full restart. */
export async function preparePlugins(job: VolcanoJob): Promise<PluginState> {
  const states = await Promise.all(pluginsOf(job).map((p) => p.onJobAdd?.(job) ?? {}));
  return Object.assign({}, ...states);
}

/** OnPodCreate of every plugin for every pod of the job, in task order. */
export function planPods(job: VolcanoJob, state: PluginState): PodPlan[] {
  const plugins = pluginsOf(job);
  const jobName = job.metadata.name;
  const pods: PodPlan[] = [];
  for (const task of job.spec.tasks) {
    for (let index = 0; index < task.replicas; index++) {
      const name = podName(jobName, task.name, index);
      const pod: PodPlan = {
        name,
        task,
        index,
        rank: pods.length,
        hostname: task.template.spec.hostname || name,
        subdomain: task.template.spec.subdomain || jobName,
        env: [],
        files: [],
      };
      for (const plugin of plugins) plugin.onPodCreate?.(pod, job, state);
      pods.push(pod);
    }
  }
  return pods;
}
