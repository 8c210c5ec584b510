import { readFile } from 'node:fs/promises';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The terminal and desktop pages and what they load: our own two scripts, xterm.js with its fit
// addon, and noVNC's ES modules, straight from their packages.

const PAGES = join(dirname(fileURLToPath(import.meta.url)), 'pages');
const packageFile = (specifier: string) => fileURLToPath(import.meta.resolve(specifier));
const XTERM = dirname(packageFile('@xterm/xterm'));
/** noVNC's root: its package exports only core/rfb.js. */
const NOVNC = dirname(dirname(packageFile('@novnc/novnc')));

const FILES: Readonly<Record<string, string>> = {
  'xterm.js': join(XTERM, 'xterm.js'),
  'xterm.css': join(XTERM, '..', 'css', 'xterm.css'),
  'addon-fit.js': packageFile('@xterm/addon-fit'),
  'shell.js': join(PAGES, 'shell.js'),
  'vnc.js': join(PAGES, 'vnc.js'),
  'vnc-start.js': join(PAGES, 'vnc-start.js'),
};

/** A noVNC module path: below core/ or vendor/, plain names only, so nothing else is reachable. */
const NOVNC_MODULE = /^novnc\/((?:core|vendor)(?:\/[A-Za-z0-9_-][A-Za-z0-9_.-]*)+\.js)$/;

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

/** Headers of every page and asset: nothing from elsewhere, no framing, no referrer. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

export interface Asset {
  type: string;
  body: Buffer;
}

const cache = new Map<string, Asset>();

async function load(path: string): Promise<Asset> {
  let asset = cache.get(path);
  if (!asset) {
    asset = { type: TYPES[extname(path)] ?? 'application/octet-stream', body: await readFile(path) };
    cache.set(path, asset);
  }
  return asset;
}

/** An asset by its name under /sessions/assets/, or undefined. */
export async function asset(name: string): Promise<Asset | undefined> {
  const file = FILES[name];
  if (file !== undefined) return load(file);
  const module = NOVNC_MODULE.exec(name)?.[1];
  if (module === undefined) return undefined;
  try {
    return await load(join(NOVNC, module));
  } catch {
    return undefined;
  }
}

export const page = (name: 'shell' | 'vnc'): Promise<Asset> => load(join(PAGES, `${name}.html`));
