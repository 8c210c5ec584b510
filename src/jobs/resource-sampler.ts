import type { JobPlugin } from '../plugins/plugin.ts';
import type { Transactional } from '../store/store.ts';
import type { Backend } from './backend.ts';
import { batched } from './batched.ts';
import type { Logger } from './log.ts';
import { periodic } from './periodic.ts';
import { runningPages } from './running-pages.ts';

// The live resource views' sampling: on a steady period, what every rank of every running job
// uses, asked of the backend in one call and appended to the jobs' series in one transaction.

export const DEFAULT_SAMPLE_MS = 5000;

export interface SamplerOptions {
  store: Transactional;
  backend: Pick<Backend, 'usage'>;
  now?: () => number;
  periodMs?: number;
  log?: Pick<Logger, 'error'>;
}

export function resourceSampler(o: SamplerOptions) {
  const now = o.now ?? Date.now;
  const periodMs = o.periodMs ?? DEFAULT_SAMPLE_MS;

  /** One pass: every running job's ranks, now. */
  async function sample(): Promise<void> {
    // Their ids only, as strings: every running row (or an object per id) each period was most of
    // what 10,000 live jobs allocated.
    const running: string[] = [];
    for await (const page of runningPages((after, limit) => o.store.jobs.runningIds(after, limit))) {
      for (const id of page) running.push(id);
    }
    if (running.length === 0) return;
    const usage = await o.backend.usage(running);
    if (usage.size > 0) await o.store.resourceSeries.append(now(), usage);
  }

  return { periodMs, sample, ...periodic(sample, periodMs, 'sampling what jobs use', o.log) };
}

/** Forgets a job's series once it has ended (JobManagement's cleanup hook). */
export function resourceSeriesCleanup(store: Transactional): JobPlugin {
  return {
    name: 'ResourceSeries',
    onCleanup: batched((ids) => store.resourceSeries.remove(ids)),
  };
}
