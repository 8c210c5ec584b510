/**
 * A fake UCloud Core for provider mode: it issues the provider's access tokens, signs its own calls
 * to the provider with the provider's key pair, and records what the provider tells it. Shapes are
 * UCloud's (SDU-eScience/UCloud at 63551f4e):
 * - tokens: `backend/auth-service/api/src/main/kotlin/AuthProviders.kt` (module documentation:
 *   provider tokens `{sub: "#P_<id>", role: "PROVIDER"}`, Core's `{sub: "_UCloud", role: "SERVICE"}`,
 *   `iss: "cloud.sdu.dk"`, RS256, a key pair per provider), refresh `POST /auth/providers/refresh`;
 * - control calls: `provider-integration/shared/pkg/orchestrators/jobs.go:643-716` (update,
 *   browse), `shared/pkg/accounting/accounting.go:196-214` (reportUsage, WalletOwner),
 *   `products.go:251` (`POST /api/products/v2`);
 * - the Job sent to the provider: `jobs.go` Job/JobSpecification/JobStatus, with the Application of
 *   `applications.go` (`invocation.tool.tool.description`) and the ProductV2 of `products.go`.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, decodeJwt, exportSPKI, importPKCS8, jwtVerify, SignJWT } from 'jose';
import type { ResolvedApplication } from '../../src/model/application.ts';

export const ISSUER = 'cloud.sdu.dk';

interface KeyPair {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** The public key as UCloud hands it out: base64 DER, no armour. */
  bare: string;
}

async function keyPair(): Promise<KeyPair> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const priv = await importPKCS8(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'RS256');
  const pub = (await import('jose')).importSPKI(pem, 'RS256');
  const bare = pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  return { privateKey: priv, publicKey: await pub, bare };
}

export interface TokenOptions {
  /** Signed with another provider's key pair (a token Core made for someone else). */
  otherProvider?: boolean;
  expired?: boolean;
  role?: string;
  subject?: string;
}

/** UCloud's Application JSON for one of our catalogue's applications (applications.go). */
export function ucloudApplication(resolved: ResolvedApplication, backend = 'DOCKER'): object {
  const { application, tool } = resolved;
  return {
    metadata: { ...application.metadata, public: true, createdAt: 0 },
    invocation: {
      ...application.invocation,
      tool: {
        name: tool.name,
        version: tool.version,
        tool: {
          owner: 'UCloud',
          createdAt: 0,
          modifiedAt: 0,
          description: {
            info: { name: tool.name, version: tool.version },
            container: tool.image,
            image: tool.image,
            defaultNumberOfNodes: tool.defaultNumberOfNodes,
            defaultTimeAllocation: tool.defaultTimeAllocation ?? { hours: 1, minutes: 0, seconds: 0 },
            requiredModules: [],
            authors: tool.authors,
            title: tool.title,
            description: tool.description,
            backend,
            license: tool.license ?? '',
            supportedProviders: null,
          },
        },
      },
      allowPublicIp: false,
      licenseServers: [],
    },
  };
}

export type FakeCore = Awaited<ReturnType<typeof fakeUcloudCore>>;

/**
 * Starts the fake Core on loopback, port 0. `down` makes it refuse every control call (as a Core
 * that is restarting: 503); `outOfCredits` names owners whose usage reports it answers false.
 */
export async function fakeUcloudCore(providerId: string) {
  const forProvider = await keyPair();
  const forOthers = await keyPair();
  const own = await keyPair();
  const refreshToken = `refresh-${providerId}-secret`;
  const state = {
    down: false,
    refused: 0,
    refreshes: 0,
    /** Every `jobs/control/update` item, in the order received, with when it was (epoch ms). */
    updates: [] as { id: string; update: Record<string, unknown>; receivedAt: number }[],
    usage: [] as Record<string, unknown>[],
    charges: [] as Record<string, unknown>[],
    products: [] as Record<string, unknown>[],
    /** Jobs Core has, with the state the updates gave them. */
    jobs: new Map<string, { id: string; createdAt: number; status: { state: string } }>(),
    outOfCredits: new Set<string>(),
  };

  async function providerToken(): Promise<string> {
    return new SignJWT({ role: 'PROVIDER' })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(ISSUER)
      .setSubject(`#P_${providerId}`)
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(own.privateKey);
  }

  async function authorised(req: IncomingMessage): Promise<boolean> {
    const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    try {
      const { payload } = await jwtVerify(token, own.publicKey, {
        issuer: ISSUER,
        subject: `#P_${providerId}`,
      });
      return payload.role === 'PROVIDER';
    } catch {
      return false;
    }
  }

  const body = (req: IncomingMessage) =>
    new Promise<Record<string, unknown>>((resolve) => {
      let text = '';
      req.on('data', (c) => (text += c));
      req.on('end', () => resolve(text === '' ? {} : JSON.parse(text)));
    });
  const reply = (res: ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://core');
    const input = await body(req);
    if (url.pathname === '/auth/providers/refresh') {
      const items = (input.items ?? []) as { refreshToken?: string }[];
      if (items[0]?.refreshToken !== refreshToken) return reply(res, 401, { why: 'unknown refresh token' });
      state.refreshes++;
      return reply(res, 200, { responses: [{ accessToken: await providerToken() }] });
    }
    if (state.down) {
      state.refused++;
      return reply(res, 503, { why: 'Core is restarting', errorCode: 'SERVICE_UNAVAILABLE' });
    }
    if (!(await authorised(req))) return reply(res, 401, { why: 'unauthorised', errorCode: 'UNAUTHORIZED' });
    const items = (input.items ?? []) as Record<string, unknown>[];
    switch (`${req.method} ${url.pathname}`) {
      case 'POST /api/jobs/control/update':
        for (const item of items as { id: string; update: Record<string, unknown> }[]) {
          state.updates.push({ ...item, receivedAt: Date.now() });
          const job = state.jobs.get(item.id);
          if (job && typeof item.update.state === 'string') job.status.state = item.update.state;
        }
        return reply(res, 200, {});
      case 'POST /api/accounting/v2/reportUsage':
        state.usage.push(...items);
        return reply(res, 200, {
          responses: items.map((i) => {
            const owner = i.owner as { username?: string; projectId?: string };
            return !state.outOfCredits.has(owner.projectId || owner.username || '');
          }),
        });
      case 'POST /api/jobs/control/chargeCredits':
        state.charges.push(...items);
        return reply(res, 200, { insufficientFunds: [], duplicateCharges: [] });
      case 'POST /api/products/v2':
        state.products.push(...items);
        return reply(res, 200, {});
      case 'GET /api/jobs/control/browse':
        return reply(res, 200, { itemsPerPage: 250, items: [...state.jobs.values()], next: null });
      default:
        return reply(res, 404, { why: `no ${req.method} ${url.pathname}`, errorCode: 'NOT_FOUND' });
    }
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: Error) => reply(res, 500, { why: e.message }));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    state,
    refreshToken,
    /** Core's public key for this provider, as UCloud hands it out. */
    publicKeyForProvider: forProvider.bare,
    publicKeyPem: await exportSPKI(forProvider.publicKey),

    /** A JWT as Core sends to the provider (or one it must refuse). */
    async token(o: TokenOptions = {}): Promise<string> {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ role: o.role ?? 'SERVICE' })
        .setProtectedHeader({ alg: 'RS256' })
        .setIssuer(ISSUER)
        .setSubject(o.subject ?? '_UCloud')
        .setIssuedAt(o.expired ? now - 3600 : now)
        .setExpirationTime(o.expired ? now - 1800 : now + 600)
        .sign((o.otherProvider ? forOthers : forProvider).privateKey);
    },

    /** A Job as Core sends it: stored by Core first (IN_QUEUE), then sent to the provider. */
    job(
      id: string,
      application: object,
      spec: Record<string, unknown>,
      owner: { createdBy: string; project: string | null } = { createdBy: 'alice#1234', project: null },
    ): Record<string, unknown> {
      const job = { id, createdAt: Date.now(), status: { state: 'IN_QUEUE' } };
      state.jobs.set(id, job);
      return {
        id,
        owner,
        updates: [],
        specification: { replicas: 1, allowDuplicateJob: false, parameters: {}, resources: [], ...spec },
        status: {
          state: 'IN_QUEUE',
          resolvedApplication: application,
          resolvedProduct: null,
          allowRestart: false,
        },
        createdAt: job.createdAt,
        permissions: null,
      };
    },

    /** The updates Core received for one job, in order. */
    updatesOf(id: string) {
      return state.updates.filter((u) => u.id === id).map((u) => u.update);
    },

    decode: decodeJwt,

    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}
