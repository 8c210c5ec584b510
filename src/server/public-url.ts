import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { Type } from '@sinclair/typebox';
import type { Reached } from '../interactive/sessions.ts';

/**
 * Where people reach this service. Every link it hands out (sign-in links, session URLs) and the
 * origin its own pages must come from are this one, configured (`server.publicUrl`) or, by
 * default, the address the server listens on; never a request's `Host` header, which whoever
 * sends the request chooses.
 */
export interface PublicUrl {
  /** `https://compute.example.org`, or by default the listen address, `http://localhost:7080`. */
  origin(): string;
  /** The origin as session URLs are built from it: scheme, origin and port. */
  reached(): Reached;
  /** Over TLS: the web interface's cookies are Secure and its session cookie `__Host-` prefixed. */
  secure(): boolean;
}

const ORIGIN = /^https?:\/\/[^/?#\s@]+\/?$/;

/** `server.publicUrl`: an origin, scheme, host and port, without a path (the API is at /api). */
export const PublicOrigin = Type.String({
  pattern: ORIGIN.source,
  description: 'an origin: http(s)://host[:port], without a path',
});

/** Whether `url` is an origin `server.publicUrl` accepts. */
export function isOrigin(url: string): boolean {
  if (!ORIGIN.test(url)) return false;
  try {
    return new URL(url).origin !== 'null';
  } catch {
    return false;
  }
}

/** Where a server that is not listening (requests injected in tests) says it is. */
const NOT_LISTENING = 'http://localhost';

/** The public URL: `configured` (its origin), else the server's listen address once it listens. */
export function publicUrl(server: Server, configured?: string): PublicUrl {
  const fixed = configured === undefined ? undefined : new URL(configured).origin;
  const origin = () => fixed ?? listenOrigin(server.address());
  return {
    origin,
    reached() {
      const url = new URL(origin());
      return {
        protocol: url.protocol === 'https:' ? 'https' : 'http',
        origin: url.origin,
        portSuffix: url.port === '' ? '' : `:${url.port}`,
      };
    },
    secure: () => origin().startsWith('https:'),
  };
}

/**
 * `http://<address>:<port>`. A loopback address is named `localhost`, the name browsers give
 * this machine and under which the apps' origins (`app-….localhost`) are; an address that takes
 * every interface is named by this machine's name.
 */
function listenOrigin(address: AddressInfo | string | null): string {
  if (address === null || typeof address === 'string') return NOT_LISTENING;
  const host =
    address.address === '0.0.0.0' || address.address === '::'
      ? hostname()
      : address.address.startsWith('127.') || address.address === '::1'
        ? 'localhost'
        : address.family === 'IPv6'
          ? `[${address.address}]`
          : address.address;
  return `http://${host}:${address.port}`;
}
