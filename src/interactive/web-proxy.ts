import {
  Agent,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { Backend } from '../jobs/backend.ts';
import { cookiePairs, UI_COOKIE } from './cookies.ts';
import { AUTHORIZE_PATH, type Sessions } from './sessions.ts';

// The web proxy: every job's web app on its own origin, reached only with a session for exactly
// that job and rank. Requests for any other host go to the API.

export interface AppTarget {
  jobId: string;
  rank: number;
}

export interface ProxyOptions {
  sessions: Sessions;
  backend: Pick<Backend, 'connect'>;
  log: { warn(obj: object, msg?: string): void };
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) and the ones the proxy sets itself. */
const NOT_FORWARDED = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'authorization',
  'cookie',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);

export function webProxy(o: ProxyOptions) {
  const { sessions, backend } = o;
  const agents = new Map<string, Agent>();

  /** One keep-alive agent per job and rank, whose connections the backend makes. */
  function agentFor(target: AppTarget, port: number): Agent {
    const key = `${target.jobId}/${target.rank}/${port}`;
    let agent = agents.get(key);
    if (!agent) {
      agent = new Agent({ keepAlive: true, timeout: 60_000 });
      agent.createConnection = (_options, done) => {
        backend.connect(target.jobId, target.rank, port).then(
          (stream) => done?.(null, socketLike(stream)),
          (err: Error) => done?.(err, undefined as never),
        );
        return undefined as never;
      };
      agents.set(key, agent);
    }
    return agent;
  }

  /** The job and rank a request's Host names, or undefined when it is not an app's origin. */
  function targetOf(req: IncomingMessage): AppTarget | undefined {
    const host = req.headers.host;
    if (host === undefined) return undefined;
    return sessions.parseAppHost(host.replace(/:[0-9]+$/, ''));
  }

  /**
   * Our cookie's values (a page on a sibling origin may have set more than one) and the rest,
   * without the web interface's cookie: an app never sees a session of the API.
   */
  function splitCookies(req: IncomingMessage): { ours: string[]; others: string } {
    const cookieName = cookieNameOf(req);
    const ours: string[] = [];
    const others: string[] = [];
    for (const { name, value, text } of cookiePairs(req.headers.cookie)) {
      if (name === cookieName) ours.push(value);
      else if (name !== UI_COOKIE) others.push(text);
    }
    return { ours, others: others.join('; ') };
  }

  function hasSession(req: IncomingMessage, target: AppTarget): boolean {
    return splitCookies(req).ours.some(
      (secret) => sessions.use(secret, 'WEB', target.jobId, target.rank) !== undefined,
    );
  }

  function forwardedHeaders(req: IncomingMessage): IncomingHttpHeaders {
    const headers: IncomingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (!NOT_FORWARDED.has(name)) headers[name] = value;
    }
    const { others } = splitCookies(req);
    if (others !== '') headers.cookie = others;
    headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
    headers['x-forwarded-proto'] = overTls(req) ? 'https' : 'http';
    headers['x-forwarded-host'] = req.headers.host ?? '';
    return headers;
  }

  function authorize(req: IncomingMessage, res: ServerResponse, target: AppTarget, url: URL): void {
    const secret = sessions.trade(url.searchParams.get('ticket') ?? '', target.jobId, target.rank);
    if (secret === undefined) {
      page(res, 403, 'This link was used already or has expired. Open the app again from ucompute.', target);
      return;
    }
    // No Domain attribute: the cookie belongs to this job's origin only.
    const cookie = `${cookieNameOf(req)}=${secret}; Path=/; HttpOnly; SameSite=Lax${overTls(req) ? '; Secure' : ''}`;
    res.writeHead(303, { location: '/', 'set-cookie': cookie, 'cache-control': 'no-store' });
    res.end();
    req.resume();
  }

  function page(res: ServerResponse, status: number, message: string, target: AppTarget): void {
    const body =
      '<!doctype html><meta charset="utf-8"><title>ucompute</title>' +
      `<p>${message}</p><p>To open this app, run <code>ucompute open ${target.jobId} --rank ${target.rank}</code> ` +
      'or use the job\'s "Open" action: it signs you in to this address.</p>';
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body);
  }

  return {
    targetOf,

    /** Serves one HTTP request at an app's origin. */
    handle(req: IncomingMessage, res: ServerResponse, target: AppTarget): void {
      const url = normalised(req.url);
      if (!url) {
        res.writeHead(400).end();
        return;
      }
      if (url.pathname === AUTHORIZE_PATH) {
        authorize(req, res, target, url);
        return;
      }
      const port = sessions.portOf(target.jobId, 'WEB');
      if (!hasSession(req, target) || port === undefined) {
        page(res, 401, 'You are not signed in to this app.', target);
        return;
      }
      const upstream = request({
        agent: agentFor(target, port),
        method: req.method,
        path: url.pathname + url.search,
        headers: forwardedHeaders(req),
      });
      upstream.on('response', (answer) => {
        const headers: IncomingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (!NOT_FORWARDED.has(name) || name === 'cookie') headers[name] = value;
        }
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
        // A response without a length (server-sent events, other streams) may wait long for its
        // first chunk: its headers go out now. Others go out with their body, in one packet.
        if (answer.headers['content-length'] === undefined) res.flushHeaders();
        answer.pipe(res);
      });
      upstream.on('error', (err) => {
        o.log.warn({ err, jobId: target.jobId, rank: target.rank }, 'the web app did not answer');
        if (!res.headersSent)
          page(res, 502, 'The app is not answering (yet). Try again in a moment.', target);
        else res.destroy();
      });
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      req.pipe(upstream);
    },

    /** Relays one WebSocket (or other upgrade) at an app's origin, only with a session. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: AppTarget): void {
      const url = normalised(req.url);
      const port = sessions.portOf(target.jobId, 'WEB');
      if (!url || port === undefined || !hasSession(req, target)) {
        socket.end('HTTP/1.1 401 Unauthorized\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      socket.on('error', () => socket.destroy());
      backend.connect(target.jobId, target.rank, port).then(
        (app) => {
          const headers = forwardedHeaders(req);
          headers.connection = 'upgrade';
          headers.upgrade = req.headers.upgrade ?? 'websocket';
          let head1 = `${req.method} ${url.pathname}${url.search} HTTP/1.1\r\n`;
          for (const [name, value] of Object.entries(headers)) {
            for (const v of Array.isArray(value) ? value : [value ?? '']) head1 += `${name}: ${v}\r\n`;
          }
          app.write(`${head1}\r\n`);
          if (head.length > 0) app.write(head);
          app.on('error', () => socket.destroy());
          socket.on('close', () => app.destroy());
          app.on('close', () => socket.destroy());
          app.pipe(socket);
          socket.pipe(app);
        },
        (err: Error) => {
          o.log.warn({ err, jobId: target.jobId, rank: target.rank }, 'the web app did not answer');
          socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
        },
      );
    },

    close(): void {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}

/**
 * The request target as a URL with dot segments resolved (`%2e` too) and repeated slashes made
 * one, so that the proxy decides on, and forwards, the path the app will see; undefined for
 * anything but an origin-form target.
 */
function normalised(target: string | undefined): URL | undefined {
  if (target === undefined || !target.startsWith('/')) return undefined;
  const query = target.indexOf('?');
  const path = (query < 0 ? target : target.slice(0, query)).replace(/\/{2,}/g, '/');
  // Encoded slashes and backslashes would become separators behind a lenient app.
  if (/%(2f|5c)|\\/i.test(path)) return undefined;
  try {
    return new URL(path + (query < 0 ? '' : target.slice(query)), 'http://app.invalid');
  } catch {
    return undefined;
  }
}

/** Keep-alive agents manage sockets; a port-forward stream gets the few socket calls they make. */
function socketLike(stream: Duplex): Socket {
  if (stream instanceof Socket) return stream;
  const s = stream as Duplex & Partial<Socket>;
  s.setKeepAlive ??= () => s as Socket;
  s.setNoDelay ??= () => s as Socket;
  s.setTimeout ??= () => s as Socket;
  s.ref ??= () => s as Socket;
  s.unref ??= () => s as Socket;
  return s as Socket;
}

const overTls = (req: IncomingMessage): boolean => req.socket instanceof TLSSocket;

/** Over TLS the cookie takes the `__Host-` prefix: browsers then refuse it with a Domain attribute. */
const cookieNameOf = (req: IncomingMessage): string =>
  overTls(req) ? '__Host-ucompute-session' : 'ucompute-session';
