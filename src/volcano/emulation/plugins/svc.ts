import type { VolcanoJob } from '../../api/types.ts';
import { SVC_MOUNT_PATH, svcData, svcPluginOptions, svcVariables } from '../conventions.ts';
import type { PluginBuilder, PluginFile } from './plugin.ts';

/**
 * The svc plugin: every task's hosts in /etc/volcano (`<task>.host`, `VC_<TASK>_HOSTS`,
 * `VC_<TASK>_NUM`), and as variables unless `--inject-hosts-env=false`.
 */
export const svcPlugin: PluginBuilder = (args) => {
  const options = svcPluginOptions(args);
  // The same for every pod of the job: made once, at its first pod.
  let shared: { files: PluginFile[]; env: [string, string][] } | undefined;
  const sharedBy = (job: VolcanoJob) => {
    shared ??= {
      files: Object.entries(svcData(job)).map(([key, content]) => ({
        path: `${SVC_MOUNT_PATH}/${key}`,
        content,
        mode: 0o644,
      })),
      env: options.injectHostsEnv ? Object.entries(svcVariables(job)) : [],
    };
    return shared;
  };
  return {
    name: 'svc',
    onPodCreate(pod, job) {
      const { files, env } = sharedBy(job);
      pod.env.push(...env);
      pod.files.push(...files);
    },
  };
};
