import type { Duration, Job, Product, UnitOfPrice } from './types.ts';

// How numbers, times and prices read on the page.

const PERIOD_MINUTES: Record<UnitOfPrice, number> = {
  CREDITS_PER_MINUTE: 1,
  CREDITS_PER_HOUR: 60,
  CREDITS_PER_DAY: 24 * 60,
};

/** Credits one replica of a product costs per hour (price × units, per period). */
export function pricePerHour(product: Product): number {
  const units = product.pricedPer === 'GPU' ? (product.gpu ?? 0) : product.cpu;
  const minutes = PERIOD_MINUTES[product.unitOfPrice ?? 'CREDITS_PER_MINUTE'];
  return (units * product.pricePerUnit * 60) / minutes;
}

/** What a run costs at most: every period it may run, started ones included, for each replica. */
export function estimatedCost(product: Product, replicas: number, duration: Duration): number {
  const minutes = PERIOD_MINUTES[product.unitOfPrice ?? 'CREDITS_PER_MINUTE'];
  const periods = Math.ceil(durationMillis(duration) / 60_000 / minutes);
  const units = product.pricedPer === 'GPU' ? (product.gpu ?? 0) : product.cpu;
  return periods * units * product.pricePerUnit * replicas;
}

export function durationMillis(d: Duration): number {
  return ((d.hours * 60 + d.minutes) * 60 + d.seconds) * 1000;
}

const numbers = new Intl.NumberFormat('en', { maximumFractionDigits: 2 });
export const credits = (n: number): string => `${numbers.format(n)} credits`;
export const number = (n: number): string => numbers.format(n);

export { formatBytes } from '../../src/model/bytes.ts';

const dateTime = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
export const when = (epochMs: number): string => dateTime.format(new Date(epochMs));

/** `1 h 05 min`, `42 s`: how long something lasts or is left. */
export function span(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h} h ${String(m).padStart(2, '0')} min`;
  if (m > 0) return `${m} min ${String(s).padStart(2, '0')} s`;
  return `${s} s`;
}

/** How a final job ended, in a badge's words (its full text is the badge's title). */
export const OUTCOME_LABEL: Record<string, string> = {
  COMPLETED: 'Completed',
  CANCELLED: 'Cancelled',
  OUT_OF_CREDITS: 'Out of credits',
  EXPIRED: 'Expired',
  NEVER_STARTED: 'Never started',
  FAILED: 'Failed',
};

export const STATE_LABEL: Record<string, string> = {
  IN_QUEUE: 'In queue',
  RUNNING: 'Running',
  CANCELING: 'Cancelling',
  SUCCESS: 'Success',
  FAILURE: 'Failure',
  EXPIRED: 'Expired',
  SUSPENDED: 'Suspended',
};

/**
 * Why a job that has not started (or was suspended) waits, in its latest update's words: its place
 * in the queue, a person's suspend, or a hold while its owner is over its storage quota. Undefined
 * for a job that runs or ended.
 */
export function waitingNotice(job: Pick<Job, 'status' | 'updates'>): string | undefined {
  const { state } = job.status;
  if (state !== 'IN_QUEUE' && state !== 'SUSPENDED') return undefined;
  const latest = [...job.updates].reverse().find((u) => u.status !== undefined)?.status;
  return latest ?? (state === 'IN_QUEUE' ? 'Waiting for a machine.' : 'The job is suspended.');
}
