import { envPluginVariables } from '../conventions.ts';
import type { PluginBuilder } from './plugin.ts';

/** The env plugin: every pod's task index as VK_TASK_INDEX and VC_TASK_INDEX. */
export const envPlugin: PluginBuilder = () => ({
  name: 'env',
  onPodCreate(pod) {
    pod.env.push(...Object.entries(envPluginVariables(pod.name)));
  },
});
