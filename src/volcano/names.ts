import { createHash } from 'node:crypto';
import type { ResolvedPipelineConfig } from '../model/config.ts';
import { type Owner, ownerKey } from '../model/owner.ts';

// The names plugins write into a job's objects and backends read back: one place, so that the two
// sides cannot drift apart.

/** The Volcano Job of a ucompute job; the prefix keeps ids that start with a digit valid names. */
export function volcanoJobName(jobId: string): string {
  return `j-${jobId}`;
}

/** The single task every catalogue job has; its pods are `j-<id>-job-<rank>`. */
export const JOB_TASK_NAME = 'job';
export const USER_CONTAINER_NAME = 'user-job';

/**
 * A DNS label (≤ 63 chars of [a-z0-9-]) made from free text. When the text had to change, a
 * short hash of the original is appended, so that distinct names never collide.
 */
export function dnsLabel(prefix: string, text: string): string {
  const cleaned = text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (cleaned === text && prefix.length + cleaned.length <= 63) return `${prefix}${cleaned}`;
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 8);
  const body = cleaned.slice(0, Math.max(63 - prefix.length - 9, 0)).replace(/-+$/g, '');
  return `${prefix}${body}${body ? '-' : ''}${hash}`;
}

/** A label value (≤ 63 chars of [A-Za-z0-9_.-], alphanumeric at both ends) for free text. */
export function labelValue(text: string): string {
  if (/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(text) && text.length <= 63) return text;
  return dnsLabel('', text);
}

/** `<prefix>-u-<user>` or `<prefix>-p-<project>`, or the one configured namespace. */
export function ownerNamespace(config: ResolvedPipelineConfig, owner: Owner): string {
  if (config.kubernetes.namespaceStrategy === 'single') return config.kubernetes.namespace;
  const { kind, id } = ownerKey(owner);
  return dnsLabel(`${config.prefix}-${kind === 'user' ? 'u' : 'p'}-`, id);
}

/** The NetworkPolicy that opens a job to its own replicas, its peers and its SSH port. */
export const networkPolicyName = (jobId: string) => `policy-${jobId}`;
/** The NetworkPolicy of a job namespace that isolates every job pod of ucompute in it. */
export const JOB_ISOLATION_POLICY = 'job-isolation';

/** The Service that forwards a job's SSH port to its rank 0 (UCloud's `j-<id>-ssh`). */
export const sshServiceName = (jobId: string) => `j-${jobId}-ssh`;
/** The Secret with the public keys a job with sshEnabled accepts. */
export const sshKeysSecretName = (jobId: string) => `j-${jobId}-ssh-keys`;
/** Where those keys are in the job's containers (UCloud's path), and the file's name there. */
export const SSH_KEYS_FOLDER = '/etc/ucloud/ssh';
export const SSH_KEYS_FILE = 'authorized_keys.ucloud';
/** The port sshd listens on in a job with sshEnabled. */
export const SSH_PORT = 22;

/** Each rank's log is saved as `stdout-<rank>.log` in the job folder when the job ends. */
export const logFileName = (rank: number) => `stdout-${rank}.log`;
