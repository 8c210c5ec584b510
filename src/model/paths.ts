/**
 * Paths in ucompute storage are absolute, slash-separated and normalised: no empty, `.` or `..`
 * segments and no trailing slash. Anything else is refused rather than guessed at.
 */
export function normalisePath(path: string): string | undefined {
  if (!path.startsWith('/') || path.includes('\0')) return undefined;
  const segments = path.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '.' || s === '..')) return undefined;
  return `/${segments.join('/')}`;
}

export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

export function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

/** Linux's limits: the bytes of one name (NAME_MAX), and of a whole path (PATH_MAX less its NUL). */
export const MAX_NAME_BYTES = 255;
export const MAX_PATH_BYTES = 4095;

/** A code point that UTF-8 cannot carry: half of a UTF-16 surrogate pair, alone. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * What a file system would refuse in a path's names, in words (undefined when nothing):
 * characters UTF-8 cannot carry, NUL bytes, a name over NAME_MAX bytes, or a path over PATH_MAX
 * bytes once below `prefixBytes` of storage folder.
 */
export function pathProblem(path: string, prefixBytes = 0): string | undefined {
  if (LONE_SURROGATE.test(path)) return 'holds a character that is not valid Unicode (a lone surrogate)';
  if (path.includes('\0')) return 'holds a NUL byte';
  for (const name of path.split('/')) {
    const bytes = Buffer.byteLength(name);
    if (bytes > MAX_NAME_BYTES) {
      return `the name "${name.slice(0, 20)}…" is ${bytes} bytes long; a file name holds at most ${MAX_NAME_BYTES}`;
    }
  }
  const bytes = prefixBytes + Buffer.byteLength(path);
  if (bytes > MAX_PATH_BYTES) {
    return `is ${bytes} bytes long with the storage folder; a path holds at most ${MAX_PATH_BYTES}`;
  }
  return undefined;
}

/** `name` with `suffix` added, its end cut (at a character) so that the whole fits in a name. */
export function nameWithSuffix(name: string, suffix: string): string {
  let kept = name;
  while (Buffer.byteLength(kept) + Buffer.byteLength(suffix) > MAX_NAME_BYTES) {
    kept = [...kept].slice(0, -1).join('');
  }
  return `${kept}${suffix}`;
}
