import { type Static, Type } from '@sinclair/typebox';
import { DEFAULT_PROVIDER } from './product.ts';
import { closed } from './schema.ts';

const DnsLabel = Type.String({
  pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$',
  description: 'a DNS label (lower-case letters, digits and -)',
});

const LicenseServer = Type.Object(
  {
    id: Type.String({ minLength: 1 }),
    address: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    license: Type.Optional(Type.String()),
    tags: Type.Optional(Type.Array(Type.String())),
  },
  closed,
);
export type LicenseServer = Static<typeof LicenseServer>;

/**
 * How jobs become Kubernetes objects: the pipeline's part of the configuration's `kubernetes`
 * section. The Kubernetes backend's own part (connection, request rates, clean-up) is its settings
 * (backends/kubernetes/settings.ts); src/config composes the two.
 */
export const KubernetesObjectsConfig = Type.Object(
  {
    /** `per-owner`: one namespace (and queue) per owner, for fair share; `single`: everything in `namespace`. */
    namespaceStrategy: Type.Optional(Type.Union([Type.Literal('per-owner'), Type.Literal('single')])),
    namespace: Type.Optional(DnsLabel),
    /** The Volcano queue of every job with the `single` strategy; `per-owner` gives each owner its own. */
    queue: Type.Optional(DnsLabel),
    storageClaim: Type.Optional(DnsLabel),
    storageSubPath: Type.Optional(Type.String({ pattern: '^[^/].*[^/]$|^$' })),
    imagePullSecrets: Type.Optional(Type.Array(DnsLabel)),
    /** Image of the init container that writes /etc/ucloud. */
    helperImage: Type.Optional(Type.String({ minLength: 1 })),
    /** Where ucompute itself runs, so job network policies let its session proxy in. */
    serviceNamespace: Type.Optional(DnsLabel),
    minikube: Type.Optional(Type.Boolean()),
    allowInternet: Type.Optional(Type.Boolean()),
    /**
     * Pods of root apps run in a user namespace of their own (`hostUsers: false`), so their root is
     * an unprivileged id on the node, and root apps are allowed: for clusters that support it
     * (Kubernetes 1.33+, or 1.30+ with UserNamespacesSupport; a runtime with idmapped mounts).
     */
    userNamespaces: Type.Optional(Type.Boolean()),
    nodeSelectors: Type.Optional(
      Type.Record(Type.String(), Type.Record(Type.String(), Type.String()), {
        description: "node selector per product category; a product's own nodeSelector adds to it",
      }),
    ),
    tolerations: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Array(
          Type.Object(
            {
              key: Type.String(),
              operator: Type.Optional(Type.Union([Type.Literal('Equal'), Type.Literal('Exists')])),
              value: Type.Optional(Type.String()),
              effect: Type.Optional(
                Type.Union([
                  Type.Literal('NoSchedule'),
                  Type.Literal('PreferNoSchedule'),
                  Type.Literal('NoExecute'),
                ]),
              ),
            },
            closed,
          ),
        ),
        { description: 'tolerations per product category' },
      ),
    ),
  },
  closed,
);
export type KubernetesObjectsConfig = Static<typeof KubernetesObjectsConfig>;

/** The pipeline's part of the `accounting` settings: what a job's charges are reckoned by. */
export const ChargingConfig = Type.Object(
  {
    /**
     * The period jobs are charged by (ms): each started period of a run costs its share of the
     * product's price. Default: each product's own period (a minute for prices per minute). Every
     * product's price per period must come out a whole number of credits (checked at start).
     */
    chargePeriodMs: Type.Optional(Type.Integer({ minimum: 1000, maximum: 86_400_000 })),
  },
  closed,
);

/**
 * The parts of the configuration that shape the objects a job becomes. Every field has a default,
 * so `{}` is a complete configuration (the embedded defaults).
 */
export const PipelineConfig = Type.Object(
  {
    provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    /** Prefix of owner namespaces and queues: `<prefix>-u-<user>`, `<prefix>-p-<project>`. */
    prefix: Type.Optional(DnsLabel),
    /** Uid (and gid) of jobs that do not run as root: the uid that owns files in storage. */
    jobUid: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647 })),
    kubernetes: Type.Optional(KubernetesObjectsConfig),
    fairShare: Type.Optional(
      Type.Object(
        {
          /** Weight per owner, keyed `user:<name>` or `project:<id>`; others weigh `defaultWeight`. */
          weights: Type.Optional(Type.Record(Type.String(), Type.Integer({ minimum: 1, maximum: 65535 }))),
          defaultWeight: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
        },
        closed,
      ),
    ),
    sessions: Type.Optional(
      Type.Object(
        {
          domain: Type.Optional(Type.String({ minLength: 1 })),
          hostPrefix: Type.Optional(Type.String({ pattern: '^[a-z0-9-]*$' })),
        },
        closed,
      ),
    ),
    licenseServers: Type.Optional(Type.Array(LicenseServer)),
    /** Privileged features: the operator's to allow (SPEC §6), never a user's; all off by default. */
    security: Type.Optional(
      Type.Object(
        {
          /**
           * Catalogue apps with `runAsRoot: true` (root inside their container). Default: true where
           * that root is an unprivileged host id (the local backend's sandbox, kubernetes.userNamespaces).
           */
          allowRootApps: Type.Optional(Type.Boolean()),
          /** `hostPath` volumes in Volcano Jobs. */
          allowHostPaths: Type.Optional(Type.Boolean()),
          /** `hostNetwork`, `hostPID` and `hostIPC` in Volcano Jobs. */
          allowHostNetwork: Type.Optional(Type.Boolean()),
          /** `privileged`, added capabilities, privilege escalation and unmasked /proc in Volcano Jobs. */
          allowPrivileged: Type.Optional(Type.Boolean()),
        },
        closed,
      ),
    ),
    /**
     * The longest time any job may have, extensions included; a product may set a shorter one.
     * Default DEFAULT_MAX_TIME_ALLOCATION_HOURS; null: no maximum (and jobs may ask for no limit).
     */
    maxTimeAllocationHours: Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Null()])),
    accounting: Type.Optional(ChargingConfig),
  },
  closed,
);
export type PipelineConfig = Static<typeof PipelineConfig>;

/** The configuration with every default filled in: what the pipeline reads. */
export interface ResolvedPipelineConfig {
  provider: string;
  prefix: string;
  jobUid: number;
  kubernetes: {
    namespaceStrategy: 'per-owner' | 'single';
    namespace: string;
    queue: string;
    storageClaim: string;
    storageSubPath: string;
    imagePullSecrets: string[];
    helperImage: string;
    serviceNamespace: string;
    minikube: boolean;
    allowInternet: boolean;
    userNamespaces: boolean;
    nodeSelectors: Record<string, Record<string, string>>;
    tolerations: Record<
      string,
      { key: string; operator?: 'Equal' | 'Exists'; value?: string; effect?: string }[]
    >;
  };
  fairShare: { weights: Record<string, number>; defaultWeight: number };
  sessions: { domain: string; hostPrefix: string };
  licenseServers: LicenseServer[];
  /** Null: no operator-wide maximum. */
  maxTimeAllocationHours: number | null;
  /** accounting.chargePeriodMs; null: each product's own period. */
  chargePeriodMs: number | null;
  security: SecurityPolicy;
}

export interface SecurityPolicy {
  allowRootApps: boolean;
  allowHostPaths: boolean;
  allowHostNetwork: boolean;
  allowPrivileged: boolean;
}

/**
 * A week, a batch system's usual longest wall time: without it one request could hold a machine
 * for a million hours (and an extension could add as much).
 */
export const DEFAULT_MAX_TIME_ALLOCATION_HOURS = 168;

/** What the backend that runs the jobs does with them, where it decides a default. */
export interface BackendTraits {
  /** Root in a job's containers is an unprivileged id on the host (a user namespace of its own). */
  rootIsUnprivileged?: boolean;
}

export function resolveSecurityPolicy(
  config: PipelineConfig = {},
  traits: BackendTraits = {},
): SecurityPolicy {
  const s = config.security ?? {};
  const rootIsUnprivileged = traits.rootIsUnprivileged === true || config.kubernetes?.userNamespaces === true;
  return {
    allowRootApps: s.allowRootApps ?? rootIsUnprivileged,
    allowHostPaths: s.allowHostPaths ?? false,
    allowHostNetwork: s.allowHostNetwork ?? false,
    allowPrivileged: s.allowPrivileged ?? false,
  };
}

export function resolvePipelineConfig(
  config: PipelineConfig = {},
  traits: BackendTraits = {},
): ResolvedPipelineConfig {
  const k = config.kubernetes ?? {};
  return {
    provider: config.provider ?? DEFAULT_PROVIDER,
    prefix: config.prefix ?? 'ucompute',
    jobUid: config.jobUid ?? 11042,
    kubernetes: {
      namespaceStrategy: k.namespaceStrategy ?? 'per-owner',
      namespace: k.namespace ?? 'ucompute-jobs',
      queue: k.queue ?? 'default',
      storageClaim: k.storageClaim ?? 'ucompute-storage',
      storageSubPath: k.storageSubPath ?? '',
      imagePullSecrets: k.imagePullSecrets ?? [],
      helperImage: k.helperImage ?? 'busybox:1.36',
      serviceNamespace: k.serviceNamespace ?? 'ucompute',
      minikube: k.minikube ?? false,
      allowInternet: k.allowInternet ?? true,
      userNamespaces: k.userNamespaces ?? false,
      nodeSelectors: k.nodeSelectors ?? {},
      tolerations: k.tolerations ?? {},
    },
    fairShare: {
      weights: config.fairShare?.weights ?? {},
      defaultWeight: config.fairShare?.defaultWeight ?? 1,
    },
    sessions: {
      domain: config.sessions?.domain ?? 'localhost',
      hostPrefix: config.sessions?.hostPrefix ?? 'app-',
    },
    licenseServers: config.licenseServers ?? [],
    maxTimeAllocationHours:
      config.maxTimeAllocationHours === undefined
        ? DEFAULT_MAX_TIME_ALLOCATION_HOURS
        : config.maxTimeAllocationHours,
    chargePeriodMs: config.accounting?.chargePeriodMs ?? null,
    security: resolveSecurityPolicy(config, traits),
  };
}
