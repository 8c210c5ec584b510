import type { SimpleDuration } from '../model/application.ts';
import { CliError } from './errors.ts';

/** Durations as people write them on a command line: 45s, 90m, 2h, 1h30m, 1d, 2d12h. */
const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

export const DURATION_FORMS = '45s, 90m, 2h, 1h30m or 1d';

/**
 * A duration such as `90m`, `1h30m`, `1d` or `45s` as hours, minutes and seconds (days become 24
 * hours; minutes and seconds are carried into hours and minutes). `flag` names the option in errors.
 */
export function parseDuration(text: string, flag = '--time'): SimpleDuration {
  const m = DURATION.exec(text.trim());
  if (!text.trim() || !m)
    throw new CliError(`${flag}: "${text}" is not a duration; use forms like ${DURATION_FORMS}`);
  const total =
    Number(m[1] ?? 0) * 86_400 + Number(m[2] ?? 0) * 3600 + Number(m[3] ?? 0) * 60 + Number(m[4] ?? 0);
  if (total <= 0) throw new CliError(`${flag}: "${text}" must be longer than zero`);
  const hours = Math.floor(total / 3600);
  if (!Number.isSafeInteger(total) || hours > 1_000_000) throw new CliError(`${flag}: "${text}" is too long`);
  return { hours, minutes: Math.floor((total % 3600) / 60), seconds: total % 60 };
}

/** `1h30m`, `45s`: the form `parseDuration` reads (hours stay hours: a time limit reads as hours). */
export function formatDuration(d: SimpleDuration): string {
  const parts = [
    d.hours ? `${d.hours}h` : '',
    d.minutes ? `${d.minutes}m` : '',
    d.seconds ? `${d.seconds}s` : '',
  ];
  return parts.join('') || '0s';
}

/** Milliseconds to the nearest second, as `formatDuration` writes them. */
export function formatMillis(ms: number): string {
  const s = Math.round(ms / 1000);
  return formatDuration({
    hours: Math.floor(s / 3600),
    minutes: Math.floor((s % 3600) / 60),
    seconds: s % 60,
  });
}

/** A short span for a table column: `45s`, `12m`, `3h05m`, `2d04h`. */
export function formatSpan(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const two = (n: number) => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor((s % 86_400) / 3600))}h`;
}
