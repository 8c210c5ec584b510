import type { VolcanoJob } from '../../api/types.ts';
import { fqdn, parseFlags, taskHosts } from '../conventions.ts';
import type { PluginBuilder } from './plugin.ts';

/** The mpi plugin: the master task's MPI_HOST lists the worker task's hosts (`--master`, `--worker`). */
export const mpiPlugin: PluginBuilder = (args) => {
  const flags = parseFlags(args);
  const master = flags.master ?? 'master';
  const worker = flags.worker ?? 'worker';
  const hostsOf = (job: VolcanoJob) => {
    const task = job.spec.tasks.find((t) => t.name === worker);
    return task ? taskHosts(job.metadata.name, task).map(fqdn).join(',') : undefined;
  };
  return {
    name: 'mpi',
    onPodCreate(pod, job) {
      if (pod.task.name !== master) return;
      const hosts = hostsOf(job);
      if (hosts !== undefined) pod.env.push(['MPI_HOST', hosts]);
    },
  };
};
