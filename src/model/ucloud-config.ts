import { type Static, Type } from '@sinclair/typebox';
import { closed } from './schema.ts';

/**
 * `mode: ucloud-provider`: a UCloud Core drives ucompute as one of its compute providers. Core is
 * then the source of jobs, owners and credits; `ucloud` says how to reach it and how to know it.
 */
export const UcloudProviderConfig = Type.Object(
  {
    /** The id Core knows this provider by (`/ucloud/<providerId>/…`, `#P_<providerId>`). */
    providerId: Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$' }),
    /** Core's base URL, e.g. `https://cloud.sdu.dk`. */
    coreUrl: Type.String({ pattern: '^https?://[^/?#]+(/[^?#]*)?$', description: 'an http(s) URL' }),
    /** The file holding the refresh token Core issued when the provider was claimed. */
    refreshTokenFile: Type.String({ minLength: 1 }),
    /**
     * The file holding Core's public key for this provider, as Core hands it out (base64 DER of
     * the SubjectPublicKeyInfo, no PEM armour, as IM2 reads `ucloud_key.pub`) or as PEM.
     */
    corePublicKeyFile: Type.String({ minLength: 1 }),
    /** Where browsers reach this ucompute (session links, shell WebSockets), e.g. `https://compute.example.org`. */
    publicUrl: Type.String({ pattern: '^https?://[^/?#]+/?$', description: 'an http(s) origin' }),
    /** Also charge through the legacy `jobs/control/chargeCredits` (Kotlin Core); default false. */
    legacyChargeCredits: Type.Optional(Type.Boolean()),
    /** Most updates or usage reports in one call to Core; default 500. */
    batchSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    /** Calls to Core under way at once, each for its own jobs (a job's updates stay in order); default 4. */
    concurrentCalls: Type.Optional(Type.Integer({ minimum: 1, maximum: 16 })),
  },
  closed,
);
export type UcloudProviderConfig = Static<typeof UcloudProviderConfig>;

export const ServiceMode = Type.Union([Type.Literal('standalone'), Type.Literal('ucloud-provider')]);
export type ServiceMode = Static<typeof ServiceMode>;
