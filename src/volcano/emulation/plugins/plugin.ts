import type { TaskSpec, VolcanoJob } from '../../api/types.ts';

export interface PluginFile {
  path: string;
  content: string;
  mode: number;
}

/** One pod of a job as the plugins shape it: Volcano's pod, as far as the local backend needs it. */
export interface PodPlan {
  name: string;
  task: TaskSpec;
  /** The replica index within its task (VC_TASK_INDEX). */
  index: number;
  /** The pod's position over all tasks in order: the rank its exit code and logs are reported as. */
  rank: number;
  hostname: string;
  subdomain: string;
  /** Variables the plugins append to every container and init container, in order. */
  env: [string, string][];
  files: PluginFile[];
}

export interface SshKeyPair {
  privateKey: string;
  publicKey: string;
}

/** What the plugins made when the job was added, kept with the job (its pods share it). */
export interface PluginState {
  ssh?: SshKeyPair;
}

/**
 * One of Volcano's job plugins as the local backend applies it — Volcano's `PluginInterface`, made
 * by name from the job's arguments for it (`spec.plugins.<name>`). Hooks must be idempotent: the
 * controller may call them again (onJobAdd after a full restart, onPodCreate for a pod created
 * again). Volcano's OnJobDelete and OnJobUpdate have no counterpart here: what the plugins make
 * lives in the pods' own files, which go with the pods.
 */
export interface JobPlugin {
  readonly name: string;
  /** OnJobAdd: what the job's pods will share (the ssh key pair). */
  onJobAdd?(job: VolcanoJob): Promise<PluginState>;
  /** OnPodCreate: the pod's variables and files, appended to `pod`. */
  onPodCreate?(pod: PodPlan, job: VolcanoJob, state: PluginState): void;
}

/** Makes a plugin from its arguments (Volcano's `PluginBuilder`). */
export type PluginBuilder = (args: readonly string[]) => JobPlugin;
