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
    kubernetes: Type.Optional(
      Type.Object(
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
          nodeSelectors: Type.Optional(
            Type.Record(Type.String(), Type.Record(Type.String(), Type.String()), {
              description: "node selector per product category; a product's own nodeSelector adds to it",
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
      ),
    ),
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
          /** Catalogue apps with `runAsRoot: true` (root inside their container). */
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
    /** The longest time any job may have, extensions included; a product may set a shorter one. */
    maxTimeAllocationHours: Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Null()])),
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
    sshHost: string | null;
    /** Null: in-cluster, else $KUBECONFIG, else ~/.kube/config. */
    kubeconfig: string | null;
    /** Null: the kubeconfig's current context. */
    context: string | null;
    nodeSelectors: Record<string, Record<string, string>>;
    requestsPerSecond: number;
    requestBurst: number;
    requestTimeoutMs: number;
    reconcileIntervalMs: number;
    deleteGracePeriodSeconds: number;
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
  security: SecurityPolicy;
}

export interface SecurityPolicy {
  allowRootApps: boolean;
  allowHostPaths: boolean;
  allowHostNetwork: boolean;
  allowPrivileged: boolean;
}

export function resolveSecurityPolicy(config: PipelineConfig = {}): SecurityPolicy {
  const s = config.security ?? {};
  return {
    allowRootApps: s.allowRootApps ?? false,
    allowHostPaths: s.allowHostPaths ?? false,
    allowHostNetwork: s.allowHostNetwork ?? false,
    allowPrivileged: s.allowPrivileged ?? false,
  };
}

export function resolvePipelineConfig(config: PipelineConfig = {}): ResolvedPipelineConfig {
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
      sshHost: k.sshHost ?? null,
      kubeconfig: k.kubeconfig ?? null,
      context: k.context ?? null,
      nodeSelectors: k.nodeSelectors ?? {},
      requestsPerSecond: k.requestsPerSecond ?? 50,
      requestBurst: k.requestBurst ?? 100,
      requestTimeoutMs: k.requestTimeoutMs ?? 30_000,
      reconcileIntervalMs: k.reconcileIntervalMs ?? 300_000,
      deleteGracePeriodSeconds: k.deleteGracePeriodSeconds ?? 5,
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
    maxTimeAllocationHours: config.maxTimeAllocationHours ?? null,
    security: resolveSecurityPolicy(config),
  };
}

/** The local backend: where its pods' state lives, what they run on, and how much of the machine. */
export const LocalConfig = Type.Object(
  {
    /** Pods' and jobs' state and logs; default <dataDir>/local. */
    stateDir: Type.Optional(Type.String({ minLength: 1 })),
    /** Run jobs as plain processes when bubblewrap is missing: nothing is isolated. */
    unsandboxed: Type.Optional(Type.Boolean()),
    /** Image name to the root folder of its files (no image config); checked before the image store. */
    images: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 }))),
    /**
     * As root, each owner's containers run in a user namespace on its own 65,536 host ids, from
     * `first` on (container uid U of the k-th owner is host uid first + k·65536 + U). Default:
     * ids no other instance on the host holds, from 1,000,000 on.
     */
    userNamespaces: Type.Optional(
      Type.Object(
        { first: Type.Optional(Type.Integer({ minimum: 65536, maximum: 2 ** 32 - 2 * 65536 })) },
        closed,
      ),
    ),
    /**
     * An image neither here nor in the image store runs on the host userland view (true) or fails
     * the job (false). Default: true on the embedded defaults (no configuration file), else false.
     */
    hostUserland: Type.Optional(Type.Boolean()),
    /** What jobs may use of the machine; detected when left out. */
    capacity: Type.Optional(
      Type.Object(
        {
          cpu: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
          memoryInGigs: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
        },
        closed,
      ),
    ),
    /** Time between SIGTERM and SIGKILL when a job is stopped. */
    gracePeriodMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    /** Most processes of a pod whose product sets no `pids` (the pids cgroup). Default 4096. */
    defaultPids: Type.Optional(Type.Integer({ minimum: 16, maximum: 4_194_304 })),
    /**
     * Each container's stdout and stderr: rotated at `maxSizeBytes`, `maxFiles` kept (the current
     * one included), as the kubelet's containerLogMaxSize/containerLogMaxFiles. Default 10 MiB × 5.
     */
    logs: Type.Optional(
      Type.Object(
        {
          maxSizeBytes: Type.Optional(Type.Integer({ minimum: 4096, maximum: 2 ** 40 })),
          maxFiles: Type.Optional(Type.Integer({ minimum: 2, maximum: 100 })),
        },
        closed,
      ),
    ),
    /** Most bytes a job's folder may use while it runs; over it, the job ends FAILURE. None by default. */
    diskLimitBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** How often a running job's folder is measured against `diskLimitBytes`. Default 10 s. */
    diskCheckIntervalMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
    /**
     * SSH endpoints of sshEnabled jobs: one host port each from `firstPort` to `lastPort` (default
     * 2200-2299), bound on the server's listen address; `host` is the name printed in the job's
     * updates (default: the listen address, or this machine's name when it listens everywhere).
     */
    ssh: Type.Optional(
      Type.Object(
        {
          firstPort: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
          lastPort: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
          host: Type.Optional(Type.String({ minLength: 1 })),
        },
        closed,
      ),
    ),
    /**
     * The folder of pods' cgroups in each cgroup hierarchy (as root). Default `ucompute-<bridge>`:
     * like the bridge, the subnet and the host ids, one instance's own on a host it shares.
     */
    cgroupParent: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$' })),
    /**
     * The pod network when running as root. `bridge` (also the nftables tables' name and the
     * prefix of namespaces) and `subnet` default to names derived from the data folder that no
     * other instance on the host holds; an instance configured onto another's names refuses to start.
     */
    network: Type.Optional(
      Type.Object(
        {
          bridge: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9]{0,8}$' })),
          subnet: Type.Optional(Type.String({ pattern: '^\\d+\\.\\d+\\.\\d+\\.\\d+/\\d+$' })),
          poolSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
          /** Private or link-local destinations (CIDRs) pods may reach; all others are dropped. */
          allowEgressTo: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
          /** Whether pods reach public addresses; default true. */
          allowInternet: Type.Optional(Type.Boolean()),
        },
        closed,
      ),
    ),
  },
  closed,
);
export type LocalConfig = Static<typeof LocalConfig>;

/** The whole configuration file: the pipeline's settings plus the service's own. */
export const Config = Type.Object(
  {
    ...PipelineConfig.properties,
    server: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
        },
        closed,
      ),
    ),
    /** Where the database, the admin token and (by default) storage live. */
    dataDir: Type.Optional(Type.String({ minLength: 1 })),
    /** The catalogue folder (or folders, read as one catalogue) and the products file; the examples by default. */
    apps: Type.Optional(
      Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
    ),
    products: Type.Optional(Type.String({ minLength: 1 })),
    backend: Type.Optional(
      Type.Union([Type.Literal('dry'), Type.Literal('local'), Type.Literal('kubernetes')]),
    ),
    dry: Type.Optional(
      Type.Object(
        { runForMs: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])) },
        closed,
      ),
    ),
    storage: Type.Optional(Type.Object({ root: Type.Optional(Type.String({ minLength: 1 })) }, closed)),
    local: Type.Optional(LocalConfig),
    accounting: Type.Optional(
      Type.Object(
        {
          /** Refuse jobs of owners without credits (402). */
          requireCredits: Type.Optional(Type.Boolean()),
          /** Credits per product category granted to the local admin when it is first created. */
          initialCredits: Type.Optional(Type.Integer({ minimum: 0 })),
        },
        closed,
      ),
    ),
    monitorIntervalMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 3_600_000 })),
  },
  closed,
);
export type Config = Static<typeof Config>;
