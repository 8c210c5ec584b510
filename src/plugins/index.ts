import { accountingPlugin } from './accounting.ts';
import { connectToJobPlugin } from './connect-to-job.ts';
import { expiryPlugin } from './expiry.ts';
import { fairSharePlugin } from './fair-share.ts';
import { fileMountPlugin } from './file-mount.ts';
import { fileOutputPlugin } from './file-output.ts';
import { kataContainerPlugin } from './kata-container.ts';
import { minikubePlugin } from './minikube.ts';
import { miscellaneousPlugin } from './miscellaneous.ts';
import { multiNodePlugin } from './multi-node.ts';
import { networkLimitPlugin } from './network-limit.ts';
import { parameterPlugin } from './parameter.ts';
import type { JobPlugin } from './plugin.ts';
import { proxyPlugin } from './proxy.ts';
import { sharedMemoryPlugin } from './shared-memory.ts';
import { sshPlugin } from './ssh.ts';
import { taskPlugin } from './task.ts';

/**
 * The one ordered plugin list (UCloud's order). Every hook of every plugin runs in this order;
 * Task comes first because the others change what it builds; Ssh (UCloud/IM2's) comes after
 * ConnectToJob, whose NetworkPolicy it opens for port 22. Minikube and KataContainer decide
 * from the configuration and the product whether they do anything.
 */
export const PLUGINS: readonly JobPlugin[] = [
  taskPlugin,
  parameterPlugin,
  fileMountPlugin,
  multiNodePlugin,
  sharedMemoryPlugin,
  expiryPlugin,
  accountingPlugin,
  miscellaneousPlugin,
  networkLimitPlugin,
  fairSharePlugin,
  minikubePlugin,
  kataContainerPlugin,
  connectToJobPlugin,
  proxyPlugin,
  sshPlugin,
  fileOutputPlugin,
];
