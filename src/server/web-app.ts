import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';

// The web interface: the single-page app built into web/dist by the set-up. Its files as they are,
// and index.html for every other page path, so that the app's own routes load it.

/** Where `scripts/setup.sh` builds the app. */
export const WEB_APP_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'web', 'dist');

/** Paths that are never the app's pages: the API, sign-in, the API's description, sessions. */
const NOT_APP_PAGES = /^\/(api|auth|sessions|openapi\.json|docs|healthz|readyz|metrics)(\/|$)/;

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.wasm': 'application/wasm',
};

/** The page shown at `/` before the app is built. */
const NOT_BUILT_PAGE =
  '<!doctype html><meta charset="utf-8"><title>ucompute</title>' +
  '<p>The web interface is not built yet. Run <code>scripts/setup.sh</code> (it builds <code>web/dist</code>), ' +
  'then reload this page. The API works without it.</p>';

/** Headers of the app's pages and files: its own origin only, never framed. */
function pageHeaders(request: FastifyRequest): Record<string, string> {
  // Older browsers do not count ws: as 'self'; the host is checked before it goes in the policy.
  const sockets = /^[A-Za-z0-9.-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$/.test(request.host)
    ? ` ws://${request.host} wss://${request.host}`
    : '';
  return {
    'content-security-policy':
      `default-src 'self'; connect-src 'self'${sockets}; img-src 'self' data:; ` +
      "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
  };
}

/** Is this request one the app answers (a GET of a path that is not the API's)? */
export function isAppRequest(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  return !NOT_APP_PAGES.test(request.url.split('?')[0] ?? '');
}

/**
 * Answers an app request from `root`: a file below it when the path names one (files below
 * assets/ have hashed names and are kept a year), else index.html, never cached.
 */
export async function serveWebApp(root: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const headers = pageHeaders(request);
  const file = await fileBelow(root, request.url.split('?')[0] ?? '/');
  if (file) {
    const immutable = file.startsWith(join(root, 'assets') + sep);
    await reply
      .headers({
        ...headers,
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      })
      .send(await readFile(file));
    return;
  }
  const index = await readFile(join(root, 'index.html')).catch(() => undefined);
  if (!index) {
    await reply
      .code(503)
      .headers({ ...headers, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
      .send(NOT_BUILT_PAGE);
    return;
  }
  await reply
    .headers({ ...headers, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' })
    .send(index);
}

/** The regular file a URL path names below `root`, if there is one; nothing outside it. */
async function fileBelow(root: string, urlPath: string): Promise<string | undefined> {
  let path: string;
  try {
    path = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (path.includes('\0') || path.endsWith('/')) return undefined;
  const file = resolve(root, `.${path}`);
  if (!file.startsWith(root + sep)) return undefined;
  const found = await stat(file).catch(() => undefined);
  return found?.isFile() ? file : undefined;
}
