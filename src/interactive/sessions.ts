import { randomBytes } from 'node:crypto';
import { batched } from '../jobs/batched.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Logger } from '../jobs/log.ts';
import type { JobEnvironment } from '../jobs/prepare.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import type { Application } from '../model/application.ts';
import type { JobPlugin } from '../plugins/plugin.ts';
import type { SessionRecord } from '../store/sessions.ts';
import type { Store } from '../store/store.ts';
import { hashToken } from '../store/users.ts';

// Interactive sessions: who may open one, what it is, how long it lives. Every secret handed out
// is 256 random bits; the store keeps only its hash.

export type SessionType = 'WEB' | 'VNC' | 'SHELL';

export interface SessionRequest {
  id: string;
  rank: number;
  sessionType: SessionType;
}

export type OpenSession =
  | { type: 'web'; jobId: string; rank: number; redirectClientTo: string }
  | { type: 'vnc'; jobId: string; rank: number; url: string; password?: string }
  | { type: 'shell'; jobId: string; rank: number; sessionIdentifier: string };

/** Where the caller reached the API: session URLs use the same scheme and port. */
export interface Reached {
  protocol: 'http' | 'https';
  /** The API's own origin, e.g. `http://localhost:8642`. */
  origin: string;
  /** `:8642`, or '' for the scheme's default port. */
  portSuffix: string;
}

const HOUR = 3_600_000;
const LIFETIMES: Readonly<Record<SessionRecord['kind'], number>> = {
  // The ticket only carries the browser from the API to the app's origin.
  TICKET: 60_000,
  WEB: 10 * HOUR,
  VNC: 10 * HOUR,
  SHELL: 5 * 60_000,
};
/** Ports of this many jobs are kept; then the list starts again. */
const MAX_KEPT_PORTS = 10_000;
/** Web and VNC sessions kept in memory (the oldest loaded goes first); others are read again. */
const MAX_CACHED_SESSIONS = 10_000;
/** The last use (and the expiry it extends) of sessions in use is written this often, and at close. */
const WRITE_USE_EVERY_MS = 5_000;

/**
 * Where an opened session sends the browser. Standalone: the app's origin with a one-time ticket,
 * the VNC page on the API's origin; provider mode builds UCloud's links (see src/provider).
 */
export interface SessionLinks {
  web(jobId: string, rank: number, ticket: string, appHost: string): string;
  vnc(jobId: string, rank: number, secret: string, hasPassword: boolean): string;
}

/** The path on an app's origin that trades a ticket for the session cookie. */
export const AUTHORIZE_PATH = '/_ucompute/authorize';
const newSecret = (): string => randomBytes(32).toString('base64url');

export type Sessions = ReturnType<typeof interactiveSessions>;

export interface SessionOptions {
  store: Store;
  env: JobEnvironment;
  service: JobService;
  log?: Pick<Logger, 'error'>;
  now?: () => number;
}

export function interactiveSessions(o: SessionOptions) {
  const { store, env, service } = o;
  const now = o.now ?? Date.now;
  const { domain, hostPrefix } = env.config.sessions;
  const ports = new Map<string, number | undefined>();
  /**
   * Web and VNC sessions by hash, as read from the store and then used: a request costs no
   * store access but the job's state. Their last use reaches the store every few seconds.
   */
  const cached = new Map<string, SessionRecord>();
  /** Hashes of cached sessions used since their last use was written. */
  const used = new Set<string>();
  const writing = setInterval(() => void writeUse(), WRITE_USE_EVERY_MS);
  writing.unref();

  /**
   * Writes the last use of the sessions used since the last time (as they are now: the writing
   * outlives their place in memory); kept for later if it fails.
   */
  async function writeUse(): Promise<void> {
    if (used.size === 0) return;
    const touched = [...used].flatMap((hash) => {
      const session = cached.get(hash);
      return session ? [{ ...session }] : [];
    });
    used.clear();
    try {
      await store.transaction(async (tx) => {
        for (const s of touched) await tx.sessions.touch(s.hash, s.lastUsedAt, s.expiresAt);
      });
    } catch (err) {
      for (const s of touched) if (cached.has(s.hash)) used.add(s.hash);
      o.log?.error({ err }, 'could not record the use of sessions');
    }
  }

  /** The web or VNC session of a hash, from memory or else from the store (then kept). */
  async function cachedSession(hash: string): Promise<SessionRecord | undefined> {
    const known = cached.get(hash);
    if (known) return known;
    const session = await store.sessions.get(hash);
    if (!session || (session.kind !== 'WEB' && session.kind !== 'VNC')) return undefined;
    if (cached.size >= MAX_CACHED_SESSIONS) {
      const oldest = cached.keys().next().value as string;
      if (used.has(oldest)) void writeUse();
      cached.delete(oldest);
    }
    cached.set(hash, cached.get(hash) ?? session);
    return cached.get(hash);
  }

  /** Forgets cached sessions, their last use written first: all of them, or those `which` picks. */
  async function forgetSessions(which: (session: SessionRecord) => boolean = () => true): Promise<void> {
    const written = writeUse();
    for (const [hash, session] of cached) {
      if (which(session)) {
        cached.delete(hash);
        used.delete(hash);
      }
    }
    await written;
  }

  async function applicationOf(jobId: string): Promise<Application | undefined> {
    const job = await store.jobs.get(jobId);
    if (!job) return undefined;
    const { name, version } = job.specification.application;
    return env.catalog.find(name, version)?.application;
  }

  async function create(
    kind: SessionRecord['kind'],
    jobId: string,
    rank: number,
    username: string,
  ): Promise<string> {
    const secret = newSecret();
    const at = now();
    await store.sessions.insert({
      hash: hashToken(secret),
      kind,
      jobId,
      rank,
      username,
      createdAt: at,
      lastUsedAt: at,
      expiresAt: at + LIFETIMES[kind],
    });
    return secret;
  }

  /** The job's session settings checked for one request item; throws naming the field. */
  async function check(caller: Caller, item: SessionRequest, index: number): Promise<Application> {
    const path = `items[${index}]`;
    const job = await service.retrieve(caller, item.id);
    if (job.status.state !== 'RUNNING') {
      throw new ServiceError(409, `${path}.id: job ${item.id} is ${job.status.state}, not RUNNING`);
    }
    const replicas = job.specification.replicas ?? 1;
    if (!Number.isInteger(item.rank) || item.rank < 0 || item.rank >= replicas) {
      throw new ServiceError(400, `${path}.rank: must be a rank of the job, 0 to ${replicas - 1}`);
    }
    const application = await applicationOf(item.id);
    if (!application) throw new ServiceError(409, `${path}.id: the job's application is no longer known`);
    const type = application.invocation.applicationType;
    if (item.sessionType !== 'SHELL' && item.sessionType !== type) {
      throw new ServiceError(
        400,
        `${path}.sessionType: the application is ${type}; it offers ${type === 'BATCH' ? '' : `${type} and `}SHELL sessions`,
      );
    }
    return application;
  }

  /** The ticket or shell session behind a secret if it is of `kind`, unexpired and its job running. */
  async function valid(secret: string, kind: 'TICKET' | 'SHELL'): Promise<SessionRecord | undefined> {
    if (secret === '') return undefined;
    const session = await store.sessions.get(hashToken(secret));
    if (!session || session.kind !== kind || session.expiresAt <= now()) return undefined;
    if ((await store.jobs.state(session.jobId)) !== 'RUNNING') return undefined;
    return session;
  }

  /** The host of a job's web app: `<hostPrefix><jobId>-<rank>.<domain>`. */
  const appHost = (jobId: string, rank: number): string => `${hostPrefix}${jobId}-${rank}.${domain}`;

  return {
    /** The job and rank an app host names, or undefined for any other host. */
    parseAppHost(hostname: string): { jobId: string; rank: number } | undefined {
      const suffix = `.${domain}`;
      const host = hostname.toLowerCase();
      if (!host.startsWith(hostPrefix) || !host.endsWith(suffix)) return undefined;
      const m = /^([a-z0-9]+)-(0|[1-9][0-9]{0,5})$/.exec(host.slice(hostPrefix.length, -suffix.length));
      return m ? { jobId: m[1] as string, rank: Number(m[2]) } : undefined;
    },

    /** Opens one session per item; every item is checked before any is opened. */
    async open(
      caller: Caller,
      items: readonly SessionRequest[],
      reached: Reached,
      links: SessionLinks = standaloneLinks(reached),
    ): Promise<OpenSession[]> {
      // Sessions extended in memory have their new expiry written before the expired ones go.
      await writeUse();
      await store.sessions.deleteExpired(now());
      const applications: Application[] = [];
      for (const [i, item] of items.entries()) applications.push(await check(caller, item, i));
      const opened: OpenSession[] = [];
      for (const [i, item] of items.entries()) opened.push(await openOne(item, applications[i]!));
      return opened;

      async function openOne(item: SessionRequest, application: Application): Promise<OpenSession> {
        const { id: jobId, rank } = item;
        if (item.sessionType === 'SHELL') {
          return {
            type: 'shell',
            jobId,
            rank,
            sessionIdentifier: await create('SHELL', jobId, rank, caller.username),
          };
        }
        if (item.sessionType === 'VNC') {
          const password = application.invocation.vnc?.password;
          const secret = await create('VNC', jobId, rank, caller.username);
          const url = links.vnc(jobId, rank, secret, password !== undefined);
          return { type: 'vnc', jobId, rank, url, ...(password !== undefined ? { password } : {}) };
        }
        const ticket = await create('TICKET', jobId, rank, caller.username);
        return {
          type: 'web',
          jobId,
          rank,
          redirectClientTo: links.web(jobId, rank, ticket, appHost(jobId, rank)),
        };
      }
    },

    /**
     * Trades a web ticket for a web session of the same job and rank (once); undefined when the
     * ticket is unknown, used, expired or for another job or rank.
     */
    async trade(ticket: string, jobId: string, rank: number): Promise<string | undefined> {
      const session = await valid(ticket, 'TICKET');
      if (!session) return undefined;
      // Taken, so a ticket opens one session only, even when two requests race for it.
      const taken = await store.sessions.take(session.hash);
      if (!taken || taken.jobId !== jobId || taken.rank !== rank) return undefined;
      return create('WEB', jobId, rank, taken.username);
    },

    /**
     * The session for `secret` if it is of `kind`, for exactly this job and rank, unexpired and its
     * job running; its use is recorded and extends it (sliding lifetime).
     */
    async use(
      secret: string,
      kind: 'WEB' | 'VNC',
      jobId: string,
      rank: number,
    ): Promise<SessionRecord | undefined> {
      if (secret === '') return undefined;
      const hash = hashToken(secret);
      const session = await cachedSession(hash);
      if (!session || session.kind !== kind || session.jobId !== jobId || session.rank !== rank) {
        return undefined;
      }
      const at = now();
      if (session.expiresAt <= at || (await store.jobs.state(jobId)) !== 'RUNNING') return undefined;
      session.lastUsedAt = at;
      session.expiresAt = at + LIFETIMES[kind];
      used.add(hash);
      return session;
    },

    /** A shell session opens one terminal: its identifier is used up here. */
    async takeShell(secret: string): Promise<SessionRecord | undefined> {
      const session = await valid(secret, 'SHELL');
      return session && (await store.sessions.take(session.hash));
    },

    /** The port of the job's web or VNC app (a job's application never changes: kept). */
    async portOf(jobId: string, kind: 'WEB' | 'VNC'): Promise<number | undefined> {
      const key = `${jobId}/${kind}`;
      if (ports.has(key)) return ports.get(key);
      const invocation = (await applicationOf(jobId))?.invocation;
      const port = kind === 'WEB' ? invocation?.web?.port : invocation?.vnc?.port;
      if (ports.size >= MAX_KEPT_PORTS) ports.clear();
      ports.set(key, port);
      return port;
    },

    /** Forgets a job's cached sessions (it stopped running; they are read again if it runs again). */
    forgetJob(jobId: string): Promise<void> {
      return forgetSessions((session) => session.jobId === jobId);
    },

    /** Forgets a user's cached sessions (they were disabled and their sessions deleted): none opens now. */
    forgetUser(username: string): Promise<void> {
      return forgetSessions((session) => session.username === username);
    },

    /** Writes the last use of sessions and stops. */
    close(): Promise<void> {
      clearInterval(writing);
      return forgetSessions();
    },
  };
}

/** Standalone mode's links: the app's origin (the API's scheme and port) and the VNC page. */
function standaloneLinks(reached: Reached): SessionLinks {
  return {
    web: (_jobId, _rank, ticket, host) =>
      `${reached.protocol}://${host}${reached.portSuffix}${AUTHORIZE_PATH}?ticket=${ticket}`,
    // The secret travels in the fragment, which browsers never send to a server.
    vnc: (jobId, rank, secret, hasPassword) =>
      `${reached.origin}/sessions/vnc?jobId=${jobId}&rank=${rank}${hasPassword ? '&password=1' : ''}#${secret}`,
  };
}

/** Revokes a job's sessions once it has ended (JobManagement's cleanup hook). */
export function sessionRevocation(store: Store): JobPlugin {
  return {
    name: 'Sessions',
    onCleanup: batched((ids) => store.sessions.deleteOf(ids)),
  };
}
