import { generateKeyPair, type KeyObject } from 'node:crypto';
import {
  envPluginVariables,
  fqdn,
  parseFlags,
  podName,
  SSH_DEFAULT_KEY_PATH,
  SVC_MOUNT_PATH,
  sshConfig,
  sshPluginOptions,
  svcData,
  svcPluginOptions,
  svcVariables,
  taskHosts,
} from './conventions.ts';
import type { TaskSpec, VolcanoJob } from './types.ts';

/**
 * Volcano's job plugins as a runtime without Kubernetes applies them: what each pod of a job gets
 * (names, variables, files). OnJobAdd is `preparePlugins` (the ssh key pair, once per job and
 * again after a full restart); OnPodCreate is `planPods`.
 */

/** The plugins the local backend applies; Volcano's admission adds `svc` (and `ssh`) for `mpi`. */
export const LOCAL_PLUGINS = ['env', 'svc', 'ssh', 'mpi'] as const;

export interface PluginFile {
  path: string;
  content: string;
  mode: number;
}

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

export interface SshKeys {
  privateKey: string;
  publicKey: string;
}

export interface PluginState {
  ssh?: SshKeys;
}

/** The plugins a job asks for, with admission's defaults; an unknown plugin is an error naming it. */
export function jobPlugins(job: VolcanoJob): Record<string, string[]> {
  const plugins = { ...(job.spec.plugins ?? {}) };
  for (const name of Object.keys(plugins)) {
    if (!(LOCAL_PLUGINS as readonly string[]).includes(name)) {
      throw new Error(
        `spec.plugins.${name}: the local backend applies the ${LOCAL_PLUGINS.join(', ')} plugins, not ${name}`,
      );
    }
  }
  if (plugins.mpi !== undefined) {
    plugins.svc ??= [];
    plugins.ssh ??= [];
  }
  return plugins;
}

/** OnJobAdd: a fresh RSA key pair for the ssh plugin unless the job brings its own. */
export async function preparePlugins(job: VolcanoJob): Promise<PluginState> {
  const plugins = jobPlugins(job);
  if (plugins.ssh === undefined) return {};
  const options = sshPluginOptions(plugins.ssh);
  if (options.privateKey !== undefined && options.publicKey !== undefined) {
    return { ssh: { privateKey: options.privateKey, publicKey: options.publicKey } };
  }
  return { ssh: await rsaKeyPair() };
}

/** A 2048-bit RSA key as the ssh plugin makes it: PKCS#1 PEM, and `ssh-rsa <base64>\n`. */
async function rsaKeyPair(): Promise<SshKeys> {
  const pair = await new Promise<{ privateKey: KeyObject; publicKey: KeyObject }>((resolve, reject) =>
    generateKeyPair('rsa', { modulusLength: 2048 }, (err, publicKey, privateKey) =>
      err ? reject(err) : resolve({ privateKey, publicKey }),
    ),
  );
  const jwk = pair.publicKey.export({ format: 'jwk' });
  return {
    privateKey: pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    publicKey: opensshRsa(jwk.e ?? '', jwk.n ?? ''),
  };
}

/** The OpenSSH wire encoding of an RSA public key: string "ssh-rsa", mpint e, mpint n. */
function opensshRsa(e64: string, n64: string): string {
  const mpint = (b64url: string) => {
    let bytes = Buffer.from(b64url, 'base64url');
    if ((bytes[0] ?? 0) & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
    return bytes;
  };
  const field = (b: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(b.length);
    return Buffer.concat([length, b]);
  };
  const blob = Buffer.concat([field(Buffer.from('ssh-rsa')), field(mpint(e64)), field(mpint(n64))]);
  return `ssh-rsa ${blob.toString('base64')}\n`;
}

/** OnPodCreate for every pod of the job, in task order. */
export function planPods(job: VolcanoJob, state: PluginState): PodPlan[] {
  const plugins = jobPlugins(job);
  const jobName = job.metadata.name;
  const svc = plugins.svc !== undefined ? svcPluginOptions(plugins.svc) : undefined;
  const svcFiles: PluginFile[] = svc
    ? Object.entries(svcData(job)).map(([key, content]) => ({
        path: `${SVC_MOUNT_PATH}/${key}`,
        content,
        mode: 0o644,
      }))
    : [];
  const hostEnv: [string, string][] = svc?.injectHostsEnv ? Object.entries(svcVariables(job)) : [];
  const sshFiles = plugins.ssh !== undefined && state.ssh ? sshPluginFiles(job, plugins.ssh, state.ssh) : [];
  const mpi = plugins.mpi !== undefined ? mpiHosts(job, plugins.mpi) : undefined;

  const pods: PodPlan[] = [];
  for (const task of job.spec.tasks) {
    for (let index = 0; index < task.replicas; index++) {
      const name = podName(jobName, task.name, index);
      const env: [string, string][] = [];
      if (plugins.env !== undefined) env.push(...Object.entries(envPluginVariables(name)));
      env.push(...hostEnv);
      if (mpi && task.name === mpi.master && mpi.hosts !== undefined) env.push(['MPI_HOST', mpi.hosts]);
      pods.push({
        name,
        task,
        index,
        rank: pods.length,
        hostname: task.template.spec.hostname || name,
        subdomain: task.template.spec.subdomain || jobName,
        env,
        files: [...svcFiles, ...sshFiles],
      });
    }
  }
  return pods;
}

function sshPluginFiles(job: VolcanoJob, args: string[], keys: SshKeys): PluginFile[] {
  const options = sshPluginOptions(args);
  // Volcano makes the keys readable by all when they go elsewhere than root's folder (non-root users).
  const mode = options.keyFilePath === SSH_DEFAULT_KEY_PATH ? 0o600 : 0o644;
  const dir = options.keyFilePath.replace(/\/+$/, '');
  return [
    { path: `${dir}/id_rsa`, content: keys.privateKey, mode },
    { path: `${dir}/id_rsa.pub`, content: keys.publicKey, mode },
    { path: `${dir}/authorized_keys`, content: keys.publicKey, mode },
    { path: `${dir}/config`, content: sshConfig(job, options.port), mode },
  ];
}

/** The mpi plugin: the master's MPI_HOST lists the worker task's hosts. */
function mpiHosts(job: VolcanoJob, args: string[]): { master: string; hosts?: string } {
  const flags = parseFlags(args);
  const master = flags.master ?? 'master';
  const worker = job.spec.tasks.find((t) => t.name === (flags.worker ?? 'worker'));
  return worker ? { master, hosts: taskHosts(job.metadata.name, worker).map(fqdn).join(',') } : { master };
}
