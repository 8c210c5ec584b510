import type { TaskSpec, VolcanoJob } from '../api/types.ts';

/**
 * The conventions of Volcano's job controller and its `env`, `svc` and `ssh` plugins, shared by
 * the backends so that a job sees the same names, files and variables locally and on a cluster.
 */

export const VOLCANO_JOB_NAME_LABEL = 'volcano.sh/job-name';
export const VOLCANO_JOB_NAMESPACE_LABEL = 'volcano.sh/job-namespace';
export const VOLCANO_TASK_INDEX_LABEL = 'volcano.sh/task-index';
export const VOLCANO_TASK_SPEC_LABEL = 'volcano.sh/task-spec';

/** Where the svc plugin mounts its host files, and where ssh keys go by default. */
export const SVC_MOUNT_PATH = '/etc/volcano';
export const SSH_DEFAULT_KEY_PATH = '/root/.ssh';
export const SSH_DEFAULT_PORT = 22;

export function podName(jobName: string, taskName: string, index: number): string {
  return `${jobName}-${taskName}-${index}`;
}

/** The env plugin's task index: the last `-`-separated segment of a pod name; empty with fewer than 3. */
export function taskIndexFromPodName(pod: string): string {
  const parts = pod.split('-');
  return parts.length < 3 ? '' : (parts[parts.length - 1] ?? '');
}

/** `VK_TASK_INDEX` and `VC_TASK_INDEX`, with identical values (env plugin). */
export function envPluginVariables(pod: string): Record<string, string> {
  const index = taskIndexFromPodName(pod);
  return { VK_TASK_INDEX: index, VC_TASK_INDEX: index };
}

export interface Host {
  hostname: string;
  subdomain: string;
}

/** A task's hosts: one per replica, or just one when the template fixes its hostname (svc plugin rule). */
export function taskHosts(jobName: string, task: TaskSpec): Host[] {
  const fixed = task.template.spec.hostname;
  // An empty subdomain is a missing one (the svc plugin tests `len(subdomain) == 0`).
  const subdomain = task.template.spec.subdomain || jobName;
  if (fixed !== undefined && fixed !== '') return task.replicas > 0 ? [{ hostname: fixed, subdomain }] : [];
  return Array.from({ length: task.replicas }, (_, i) => ({
    hostname: podName(jobName, task.name, i),
    subdomain,
  }));
}

export const fqdn = (h: Host): string => `${h.hostname}.${h.subdomain}`;

/** The task part of svc keys: `-` becomes `_`, and upper case for variable names. */
export function svcTaskKey(taskName: string): { file: string; variable: string } {
  const file = taskName.replace(/-/g, '_');
  return { file, variable: file.toUpperCase() };
}

/**
 * The svc plugin's ConfigMap data: per task `<task>.host` (newline-joined, no trailing newline),
 * `VC_<TASK>_HOSTS` (comma-joined) and `VC_<TASK>_NUM`. Every key is also a file in /etc/volcano.
 */
export function svcData(job: VolcanoJob): Record<string, string> {
  const data: Record<string, string> = {};
  for (const task of job.spec.tasks) {
    const hosts = taskHosts(job.metadata.name, task).map(fqdn);
    const key = svcTaskKey(task.name);
    data[`${key.file}.host`] = hosts.join('\n');
    data[`VC_${key.variable}_HOSTS`] = hosts.join(',');
    data[`VC_${key.variable}_NUM`] = String(hosts.length);
  }
  return data;
}

/** Host variables as env (`VC_<TASK>_HOSTS`, `VC_<TASK>_NUM`) for every task of the job. */
export function svcVariables(job: VolcanoJob): Record<string, string> {
  const data = svcData(job);
  return Object.fromEntries(Object.entries(data).filter(([k]) => k.startsWith('VC_')));
}

/** The ssh plugin's `config` file: no host key checks, and one stanza per host. */
export function sshConfig(job: VolcanoJob, port = SSH_DEFAULT_PORT): string {
  const lines = ['StrictHostKeyChecking no', 'UserKnownHostsFile /dev/null'];
  for (const task of job.spec.tasks) {
    for (const host of taskHosts(job.metadata.name, task)) {
      lines.push(`Host ${host.hostname}`, `  HostName ${fqdn(host)}`, `  Port ${port}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export interface SshPluginOptions {
  keyFilePath: string;
  port: number;
  privateKey?: string;
  publicKey?: string;
}

/** Parses the ssh plugin's arguments as Go's flag package does (`--name=value` or `-name=value`). */
export function sshPluginOptions(args: readonly string[] = []): SshPluginOptions {
  const flags = parseFlags(args);
  const port = Number(flags['ssh-port']);
  return {
    keyFilePath: flags['ssh-key-file-path'] ?? SSH_DEFAULT_KEY_PATH,
    port: Number.isInteger(port) && port >= 1 && port <= 65535 ? port : SSH_DEFAULT_PORT,
    ...(flags['ssh-private-key'] !== undefined ? { privateKey: flags['ssh-private-key'] } : {}),
    ...(flags['ssh-public-key'] !== undefined ? { publicKey: flags['ssh-public-key'] } : {}),
  };
}

export interface SvcPluginOptions {
  publishNotReadyAddresses: boolean;
  disableNetworkPolicy: boolean;
  injectHostsEnv: boolean;
}

export function svcPluginOptions(args: readonly string[] = []): SvcPluginOptions {
  const flags = parseFlags(args);
  const bool = (name: string, fallback: boolean) => {
    const v = flags[name];
    return v === undefined
      ? fallback
      : v === '' || v === 'true' || v === '1' || v === 't' || v === 'T' || v === 'TRUE';
  };
  return {
    publishNotReadyAddresses: bool('publish-not-ready-addresses', false),
    disableNetworkPolicy: bool('disable-network-policy', false),
    injectHostsEnv: bool('inject-hosts-env', true),
  };
}

/** Plugin arguments as Go's flag package reads them: `--name=value`, `-name=value`, `--name`. */
export function parseFlags(args: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (const arg of args) {
    const m = /^--?([^=]+)(?:=(.*))?$/.exec(arg);
    if (m?.[1] !== undefined) flags[m[1]] = m[2] ?? '';
  }
  return flags;
}
