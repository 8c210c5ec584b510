import { type CryptoKey, errors, importSPKI, importX509, type JWTPayload, jwtVerify } from 'jose';

// Core's tokens as a provider must check them (SDU-eScience/UCloud, the module documentation of
// `backend/auth-service/api/src/main/kotlin/AuthProviders.kt`): Core signs the JWTs it sends to a
// provider with a key pair of that provider's own, and the provider verifies `alg == RS256`,
// `sub == "_UCloud"`, `iat`/`exp`, `iss == "cloud.sdu.dk"` and `role == "SERVICE"`.

export const CORE_ISSUER = 'cloud.sdu.dk';
export const CORE_SUBJECT = '_UCloud';
export const CORE_ROLE = 'SERVICE';
/** Clocks of Core and provider may differ by this much. */
const CLOCK_TOLERANCE_S = 5;

/**
 * Core's public key for this provider from the text of its file: base64 DER of the
 * SubjectPublicKeyInfo without armour, as UCloud hands it out and IM2 reads `ucloud_key.pub`
 * (`provider-integration/im2/pkg/config/00_module.go` `readPublicKey`), a PEM public key, or a PEM
 * certificate (IM2's `ucloud_crt.pem`).
 */
export async function readCorePublicKey(text: string): Promise<CryptoKey> {
  const trimmed = text.trim();
  if (trimmed.startsWith('-----BEGIN CERTIFICATE-----')) return importX509(trimmed, 'RS256');
  if (trimmed.startsWith('-----BEGIN')) return importSPKI(trimmed, 'RS256');
  const body = trimmed.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) {
    throw new Error('is neither PEM nor base64 DER (the key as UCloud hands it out)');
  }
  const lines = body.match(/.{1,64}/g) ?? [];
  return importSPKI(`-----BEGIN PUBLIC KEY-----\n${lines.join('\n')}\n-----END PUBLIC KEY-----`, 'RS256');
}

/** Why a token is refused, in words for the 401's `why` (never the token itself). */
export class CoreTokenError extends Error {}

/**
 * Checks a bearer token as coming from Core for this provider: signed with this provider's Core
 * key, RS256, issuer, subject, role, and not used before it was issued or after it expired.
 */
export async function verifyCoreToken(token: string, key: CryptoKey, now: number): Promise<JWTPayload> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: ['RS256'],
      issuer: CORE_ISSUER,
      subject: CORE_SUBJECT,
      requiredClaims: ['iat', 'exp'],
      currentDate: new Date(now),
      clockTolerance: CLOCK_TOLERANCE_S,
    }));
  } catch (e) {
    if (e instanceof errors.JWTExpired) throw new CoreTokenError('the token has expired');
    if (e instanceof errors.JWTClaimValidationFailed)
      throw new CoreTokenError(`the token's ${e.claim} is wrong`);
    if (e instanceof errors.JOSEError) throw new CoreTokenError("the token is not Core's for this provider");
    throw e;
  }
  if (typeof payload.iat !== 'number' || payload.iat > now / 1000 + CLOCK_TOLERANCE_S) {
    throw new CoreTokenError('the token was issued in the future');
  }
  if (payload.role !== CORE_ROLE) throw new CoreTokenError(`the token's role is not ${CORE_ROLE}`);
  return payload;
}
