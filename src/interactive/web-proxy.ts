import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { Dispatcher } from 'undici';
import type { Backend } from '../jobs/backend.ts';
import { cookiePairs, UI_COOKIES } from './cookies.ts';
import { AUTHORIZE_PATH, type Sessions } from './sessions.ts';
import { upstreams } from './upstream.ts';

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
  /** Another path that trades a ticket (in query parameter `query`) for the cookie: UCloud's `authorize-app`. */
  authorizeAlso?: { path: string; query: string };
}

/** Hop-by-hop headers (RFC 9110 §7.6.1): never forwarded, either way. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];
const NOT_FORWARDED_BACK = new Set(HOP_BY_HOP);
/**
 * Request headers the app does not get: hop-by-hop, our credentials, the ones the proxy sets
 * itself, and `Expect` (this server already answered `100 Continue`; the body follows at once).
 */
const NOT_FORWARDED = new Set([
  ...HOP_BY_HOP,
  'authorization',
  'cookie',
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);

export function webProxy(o: ProxyOptions) {
  const { sessions } = o;
  const apps = upstreams(o.backend);

  /** The job and rank a request's Host names, or undefined when it is not an app's origin. */
  function targetOf(req: IncomingMessage): AppTarget | undefined {
    const host = req.headers.host;
    if (host === undefined) return undefined;
    return sessions.parseAppHost(host.replace(/:[0-9]+$/, ''));
  }

  /**
   * The request's cookies without ours and without the web interface's (an app never sees a
   * session of the API), when one of ours (a page on a sibling origin may have set more than one)
   * is a session for exactly this job and rank; undefined without such a session.
   */
  async function signedIn(req: IncomingMessage, target: AppTarget): Promise<{ others: string } | undefined> {
    const cookieName = cookieNameOf(req);
    let valid = false;
    const others: string[] = [];
    for (const { name, value, text } of cookiePairs(req.headers.cookie)) {
      if (name === cookieName) {
        valid ||= (await sessions.use(value, 'WEB', target.jobId, target.rank)) !== undefined;
      } else if (!UI_COOKIES.has(name)) {
        others.push(text);
      }
    }
    return valid ? { others: others.join('; ') } : undefined;
  }

  function forwardedHeaders(req: IncomingMessage, cookies: string): IncomingHttpHeaders {
    const headers: IncomingHttpHeaders = {};
    const given = req.headers;
    for (const name in given) {
      if (!NOT_FORWARDED.has(name)) headers[name] = given[name];
    }
    if (cookies !== '') headers.cookie = cookies;
    headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
    headers['x-forwarded-proto'] = overTls(req) ? 'https' : 'http';
    headers['x-forwarded-host'] = given.host ?? '';
    return headers;
  }

  /** The query parameter with the ticket when the path trades one for the cookie. */
  function ticketParameter(path: string): string | undefined {
    if (path === AUTHORIZE_PATH) return 'ticket';
    return path === o.authorizeAlso?.path ? o.authorizeAlso.query : undefined;
  }

  async function authorize(
    req: IncomingMessage,
    res: ServerResponse,
    target: AppTarget,
    ticket: string,
  ): Promise<void> {
    const secret = await sessions.trade(ticket, target.jobId, target.rank);
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

  /** Relays the app's answer to one request as it comes, at the pace the browser reads it. */
  function relay(res: ServerResponse, target: AppTarget): Dispatcher.DispatchHandler {
    let clientGone = false;
    return {
      onRequestStart(controller) {
        res.on('close', () => {
          if (res.writableFinished) return;
          clientGone = true;
          controller.abort(new Error('the browser went away'));
        });
      },
      onResponseStart(_controller, status, headers, statusMessage) {
        const forwarded: IncomingHttpHeaders = {};
        for (const name in headers) {
          if (!NOT_FORWARDED_BACK.has(name)) forwarded[name] = headers[name];
        }
        if (statusMessage) res.writeHead(status, statusMessage, forwarded);
        else res.writeHead(status, forwarded);
        // A response without a length (server-sent events, other streams) may wait long for its
        // first chunk: its headers go out now. Others go out with their body, in one packet.
        if (headers['content-length'] === undefined) res.flushHeaders();
      },
      onResponseData(controller, chunk) {
        if (res.write(chunk)) return;
        controller.pause();
        res.once('drain', () => controller.resume());
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError(_controller, err) {
        if (clientGone) return;
        o.log.warn({ err, jobId: target.jobId, rank: target.rank }, 'the web app did not answer');
        if (!res.headersSent)
          page(res, 502, 'The app is not answering (yet). Try again in a moment.', target);
        else res.destroy();
      },
    };
  }

  return {
    targetOf,

    /** Serves one HTTP request at an app's origin. */
    handle(req: IncomingMessage, res: ServerResponse, target: AppTarget): void {
      serve(req, res, target).catch((err: unknown) => {
        o.log.warn({ err, jobId: target.jobId, rank: target.rank }, 'serving a web app request failed');
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
    },

    /** Relays one WebSocket (or other upgrade) at an app's origin, only with a session. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: AppTarget): void {
      socket.on('error', () => socket.destroy());
      relayUpgrade(req, socket, head, target).catch((err: unknown) => {
        o.log.warn({ err, jobId: target.jobId, rank: target.rank }, 'relaying a web app upgrade failed');
        socket.destroy();
      });
    },

    /** Closes the connections to a job's app once it stops running. */
    forget: apps.forget,

    close: apps.close,
  };

  async function serve(req: IncomingMessage, res: ServerResponse, target: AppTarget): Promise<void> {
    const url = normalised(req.url);
    if (!url) {
      res.writeHead(400).end();
      return;
    }
    const ticketIn = ticketParameter(url.pathname);
    if (ticketIn !== undefined) {
      await authorize(req, res, target, url.searchParams.get(ticketIn) ?? '');
      return;
    }
    const port = await sessions.portOf(target.jobId, 'WEB');
    const session = port === undefined ? undefined : await signedIn(req, target);
    if (!session || port === undefined) {
      page(res, 401, 'You are not signed in to this app.', target);
      return;
    }
    apps.pool(target.jobId, target.rank, port).dispatch(
      {
        method: req.method as Dispatcher.HttpMethod,
        path: url.pathname + url.search,
        headers: forwardedHeaders(req, session.others),
        // Without a length or chunked coding a request has no body (RFC 9112 §6.3).
        body:
          req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined
            ? null
            : req,
      },
      relay(res, target),
    );
  }

  async function relayUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    target: AppTarget,
  ): Promise<void> {
    const url = normalised(req.url);
    const port = await sessions.portOf(target.jobId, 'WEB');
    const session = url && port !== undefined ? await signedIn(req, target) : undefined;
    if (!url || port === undefined || !session) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    apps.connect(target.jobId, target.rank, port).then(
      (app) => {
        const headers = forwardedHeaders(req, session.others);
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
  }
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

const overTls = (req: IncomingMessage): boolean => req.socket instanceof TLSSocket;

/** Over TLS the cookie takes the `__Host-` prefix: browsers then refuse it with a Domain attribute. */
const cookieNameOf = (req: IncomingMessage): string =>
  overTls(req) ? '__Host-ucompute-session' : 'ucompute-session';
