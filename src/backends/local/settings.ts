import { type Static, Type } from '@sinclair/typebox';
import { closed } from '../../model/schema.ts';

/**
 * The local backend's settings (`local` in the configuration): where its pods' state lives, what
 * they run on, and how much of the machine.
 */
export const LocalSettings = Type.Object(
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
    /**
     * Most bytes the ended jobs' kept state and logs may hold together (under <stateDir>/jobs); past
     * it the oldest ended jobs' are removed, as past 10,000 ended jobs. Default 10 GiB.
     */
    retainedLogsBytes: Type.Optional(Type.Integer({ minimum: 2 ** 20, maximum: 2 ** 50 })),
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
export type LocalSettings = Static<typeof LocalSettings>;
