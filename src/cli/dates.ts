import { CliError } from './errors.ts';

const DAY_MS = 86_400_000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?(Z)?$/;
const AGO = /^(\d+)([dhm])$/;
const UNIT_MS: Record<string, number> = { d: DAY_MS, h: 3_600_000, m: 60_000 };

export const DATE_FORMS = '2026-11-01, 2026-11-01T14:30 (UTC), now, or an age such as 7d, 12h, 30m';

/**
 * A point in time as a person types it, in epoch ms: a UTC date or date and time (the service's
 * usage buckets are UTC days and hours), `now`, or an age before `now` (`7d`). `flag` names the
 * option in errors.
 */
export function parseDate(text: string, flag: string, now = Date.now()): number {
  const t = text.trim();
  if (t === 'now') return now;
  const ago = AGO.exec(t);
  if (ago) return now - Number(ago[1]) * UNIT_MS[ago[2]!]!;
  const m = DATE.exec(t);
  if (m) {
    const [year, month, day, hour, minute, second] = m.slice(1, 7).map((x) => Number(x ?? 0)) as number[];
    const ms = Date.UTC(year!, month! - 1, day!, hour!, minute!, second!);
    const d = new Date(ms);
    // Date.UTC carries 2026-02-30 into March; a date that does not exist is a typo.
    if (
      d.getUTCMonth() === month! - 1 &&
      d.getUTCDate() === day &&
      hour! < 24 &&
      minute! < 60 &&
      second! < 60
    ) {
      return ms;
    }
  }
  throw new CliError(`${flag}: "${text}" is not a date; use ${DATE_FORMS}`);
}

/** `2026-11-01` or, for hourly buckets, `2026-11-01 14:00` (UTC, as the buckets are). */
export function formatUtc(ms: number, withHour: boolean): string {
  const iso = new Date(ms).toISOString();
  return withHour ? `${iso.slice(0, 10)} ${iso.slice(11, 16)}` : iso.slice(0, 10);
}
