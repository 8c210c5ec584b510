import type { SimpleDuration } from '../model/application.ts';
import type { JobUpdate } from '../model/job.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

// How the command line reads and writes values: lists, tables, times and durations.

/** The items of a list response (`{items}`), or the response itself when it is a list. */
export function listOf<T>(response: unknown): T[] {
  if (Array.isArray(response)) return response as T[];
  const items = (response as { items?: unknown } | undefined)?.items;
  return Array.isArray(items) ? (items as T[]) : [];
}

/** Pretty JSON for one response; one compact line per response when several follow each other. */
export function printJson(value: unknown, line = false): void {
  cliIo().stdout.write(`${line ? JSON.stringify(value) : JSON.stringify(value, null, 2)}\n`);
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

/** Local time, to the second: what a person reads in a terminal. */
export function formatTime(ms: number | undefined): string {
  if (ms === undefined) return '-';
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Durations as people write them on a command line: 45s, 90m, 2h, 1h30m, 1d, 2d12h. */
const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

const DURATION_FORMS = '45s, 90m, 2h, 1h30m or 1d';

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
export function millisToDuration(ms: number): string {
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

/** One update as a line: its state, status and what it changed. */
export function formatUpdate(u: JobUpdate): string {
  const parts: string[] = [];
  if (u.state) parts.push(u.state);
  if (u.status) parts.push(u.status);
  if (u.newTimeAllocation !== undefined)
    parts.push(`time limit now ${millisToDuration(u.newTimeAllocation)}`);
  if (u.outputFolder) parts.push(`output folder ${u.outputFolder}`);
  return parts.join(': ') || '(no change)';
}
