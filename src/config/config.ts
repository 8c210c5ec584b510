import { type Static, Type } from '@sinclair/typebox';
import { DrySettings } from '../backends/dry/settings.ts';
import { KubernetesSettings } from '../backends/kubernetes/settings.ts';
import { LocalSettings } from '../backends/local/settings.ts';
import { ChargingConfig, KubernetesObjectsConfig, PipelineConfig } from '../model/config.ts';
import { PROJECT_ID_PATTERN, USERNAME_PATTERN } from '../model/owner.ts';
import { closed } from '../model/schema.ts';
import { ServiceMode, UcloudProviderConfig } from '../model/ucloud-config.ts';
import { PublicOrigin } from '../server/public-url.ts';

/** A PostgreSQL connection URL (libpq's form; node-postgres reads it). */
export const POSTGRES_URL_PATTERN = '^postgres(ql)?://';

/** A storage quota in bytes; null: no limit. */
const QuotaBytes = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);
/** An owner as accounts name it: `user:<name>` or `project:<id>`. */
const QUOTA_OWNER_PATTERN = `^(user:${USERNAME_PATTERN.slice(1, -1)}|project:${PROJECT_ID_PATTERN.slice(1, -1)})$`;

/**
 * The whole configuration file: the pipeline's settings, each backend's own (the Kubernetes
 * backend's beside the pipeline's in `kubernetes`), and the service's.
 */
export const Config = Type.Object(
  {
    ...PipelineConfig.properties,
    kubernetes: Type.Optional(
      Type.Object({ ...KubernetesObjectsConfig.properties, ...KubernetesSettings.properties }, closed),
    ),
    server: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
          /** Where people reach this service (an origin); default: the listen address. */
          publicUrl: Type.Optional(PublicOrigin),
        },
        closed,
      ),
    ),
    /** Where the database, the admin token and (by default) storage live. */
    dataDir: Type.Optional(Type.String({ minLength: 1 })),
    /** The store: SQLite in the data folder unless PostgreSQL (which several replicas share) is named. */
    store: Type.Optional(
      Type.Object(
        {
          postgres: Type.Object(
            {
              url: Type.String({ pattern: POSTGRES_URL_PATTERN, description: 'a postgres:// URL' }),
              /**
               * The replicas on this database elect one leader (the backend loop) on a lease: how
               * long a leader that stopped renewing keeps it (the time to a new one after a crash),
               * and how often it is renewed (and asked for by the others).
               */
              leaseSeconds: Type.Optional(Type.Number({ minimum: 1, maximum: 600 })),
              renewSeconds: Type.Optional(Type.Number({ minimum: 0.1, maximum: 60 })),
            },
            closed,
          ),
        },
        closed,
      ),
    ),
    /** The catalogue folder (or folders, read as one catalogue) and the products file; the examples by default. */
    apps: Type.Optional(
      Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
    ),
    products: Type.Optional(Type.String({ minLength: 1 })),
    backend: Type.Optional(
      Type.Union([Type.Literal('dry'), Type.Literal('local'), Type.Literal('kubernetes')]),
    ),
    dry: Type.Optional(DrySettings),
    storage: Type.Optional(
      Type.Object(
        {
          root: Type.Optional(Type.String({ minLength: 1 })),
          /** Days an entry stays in a drive's Trash before it is deleted (default 30; null: kept). */
          trashDays: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 36_500 }), Type.Null()])),
          /** Bytes each owner's drive (its job folders and Trash included) may hold; null: no limit. */
          quota: Type.Optional(
            Type.Object(
              {
                /** Every owner's quota unless named below (default 100 GiB). */
                defaultBytes: Type.Optional(QuotaBytes),
                /** Owners with a quota of their own: `user:<name>` or `project:<id>` → bytes (null: no limit). */
                owners: Type.Optional(Type.Record(Type.String({ pattern: QUOTA_OWNER_PATTERN }), QuotaBytes)),
              },
              closed,
            ),
          ),
        },
        closed,
      ),
    ),
    local: Type.Optional(LocalSettings),
    accounting: Type.Optional(
      Type.Object(
        {
          ...ChargingConfig.properties,
          /** Refuse jobs of owners without credits (402). */
          requireCredits: Type.Optional(Type.Boolean()),
          /** Credits per product category granted to the local admin when it is first created. */
          initialCredits: Type.Optional(Type.Integer({ minimum: 0 })),
        },
        closed,
      ),
    ),
    monitorIntervalMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 3_600_000 })),
    /** How often what running jobs use is sampled for the live resource views (default 5000 ms). */
    resourceSampleMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
    notifications: Type.Optional(
      Type.Object(
        {
          /** Warn this many minutes before a job's time runs out (default 15). */
          expiryWarningMinutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_080 })),
          /** Also POST each warning as JSON (`{type: "job.expiring", job, expiresAt, minutesLeft}`) here. */
          webhook: Type.Optional(Type.String({ pattern: '^https?://', description: 'an http(s) URL' })),
        },
        closed,
      ),
    ),
    /** `standalone` (default): ucompute is its own orchestrator; `ucloud-provider`: UCloud Core drives it. */
    mode: Type.Optional(ServiceMode),
    ucloud: Type.Optional(UcloudProviderConfig),
  },
  closed,
);
export type Config = Static<typeof Config>;
