import type { UsageItem } from './types.ts';

const DAY = 24 * 3600 * 1000;

/** Credits per day, one series per product category (every one named, used or not), UTC days. */
export function seriesOf(
  items: UsageItem[],
  categories: string[],
  from: number,
  to: number,
): { days: number[]; byCategory: Map<string, number[]> } {
  const first = Math.floor(from / DAY) * DAY;
  const days: number[] = [];
  for (let day = first; day < to; day += DAY) days.push(day);
  const byCategory = new Map<string, number[]>(categories.map((c) => [c, days.map(() => 0)]));
  for (const item of items) {
    const series = byCategory.get(item.category) ?? days.map(() => 0);
    const i = Math.floor((item.start - first) / DAY);
    if (i >= 0 && i < series.length) series[i] = (series[i] ?? 0) + item.credits;
    byCategory.set(item.category, series);
  }
  return { days, byCategory };
}
