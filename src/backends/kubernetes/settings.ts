import { type Static, Type } from '@sinclair/typebox';
import { closed } from '../../model/schema.ts';

/**
 * The Kubernetes backend's own settings, in the configuration's `kubernetes` section beside the
 * pipeline's (model/config.ts, how jobs become objects): how it connects to the cluster, how hard
 * it may press the API server, and how it cleans up.
 */
export const KubernetesSettings = Type.Object(
  {
    /** The address users reach NodePorts by (jobs' SSH endpoints); default: the API server's host. */
    sshHost: Type.Optional(Type.String({ minLength: 1 })),
    kubeconfig: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'kubeconfig file to connect with; default: in-cluster service account, else $KUBECONFIG, else ~/.kube/config',
      }),
    ),
    context: Type.Optional(
      Type.String({
        minLength: 1,
        description: "kubeconfig context to use; default: the file's current context",
      }),
    ),
    requestsPerSecond: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: 100_000,
        description: 'client-side rate limit of API requests (not watches or streams); default 50',
      }),
    ),
    requestBurst: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100_000,
        description: 'requests allowed at once above the rate; default 100',
      }),
    ),
    requestTimeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 600_000,
        description: 'timeout of one API request; default 30000',
      }),
    ),
    reconcileIntervalMs: Type.Optional(
      Type.Integer({
        minimum: 1000,
        maximum: 86_400_000,
        description:
          'how often objects of ours without a live job are looked for and deleted; default 300000',
      }),
    ),
    deleteGracePeriodSeconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 3600,
        description: "grace period of a cancelled job's pods; default 5",
      }),
    ),
  },
  closed,
);
export type KubernetesSettings = Static<typeof KubernetesSettings>;

/** The settings with every default filled in. */
export interface ResolvedKubernetesSettings {
  sshHost: string | null;
  /** Null: in-cluster, else $KUBECONFIG, else ~/.kube/config. */
  kubeconfig: string | null;
  /** Null: the kubeconfig's current context. */
  context: string | null;
  requestsPerSecond: number;
  requestBurst: number;
  requestTimeoutMs: number;
  reconcileIntervalMs: number;
  deleteGracePeriodSeconds: number;
}

export function resolveKubernetesSettings(settings: KubernetesSettings = {}): ResolvedKubernetesSettings {
  return {
    sshHost: settings.sshHost ?? null,
    kubeconfig: settings.kubeconfig ?? null,
    context: settings.context ?? null,
    requestsPerSecond: settings.requestsPerSecond ?? 50,
    requestBurst: settings.requestBurst ?? 100,
    requestTimeoutMs: settings.requestTimeoutMs ?? 30_000,
    reconcileIntervalMs: settings.reconcileIntervalMs ?? 300_000,
    deleteGracePeriodSeconds: settings.deleteGracePeriodSeconds ?? 5,
  };
}
