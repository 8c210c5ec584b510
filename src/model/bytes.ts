const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** A size for people, 1024-based: `512 B`, `1.5 KiB`, `3.2 GiB`. Plain code: the web interface uses it too. */
export function formatBytes(n: number): string {
  let value = n;
  let unit = 0;
  for (; value >= 1024 && unit < UNITS.length - 1; unit++) value /= 1024;
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}
