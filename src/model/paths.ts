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
