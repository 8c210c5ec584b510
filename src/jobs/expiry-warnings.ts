import type { RunningJob } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import type { Logger } from './log.ts';
import { periodic } from './periodic.ts';
import { runningPages } from './running-pages.ts';

// A warning before a job's time runs out, as Open OnDemand users asked for: once per deadline, a
// line in the job's updates (which the web page, `ucompute show` and followers show), and, where
// the operator configured one, a POST to a webhook. An extension moves the deadline, so the new
// one is warned of again.

export const DEFAULT_WARN_BEFORE_MS = 15 * 60_000;
/** How often deadlines are looked at: a warning comes at most this late. */
const CHECK_EVERY_MS = 10_000;
const WEBHOOK_TIMEOUT_MS = 10_000;

/** The warning's words: the same for the same deadline, so that a restarted service finds it said. */
export function expiryWarning(expiresAt: number): string {
  const at = new Date(expiresAt).toISOString().slice(0, 16).replace('T', ' ');
  return `The job's time runs out at ${at} UTC: extend it to keep it running`;
}

/** Whether a running job's deadline is close enough to warn of (and not past: it expires then). */
export function warningDue(expiresAt: number | null, now: number, warnBeforeMs: number): boolean {
  return expiresAt !== null && expiresAt > now && expiresAt - now <= warnBeforeMs;
}

export interface ExpiryWarningOptions {
  store: Transactional;
  /** Adds the warning to the job's updates. */
  addStatus(jobId: string, status: string): Promise<unknown>;
  now?: () => number;
  warnBeforeMs?: number;
  /** Where each warning is also POSTed as JSON, if anywhere. */
  webhook?: string;
  log?: Pick<Logger, 'error' | 'warn'>;
}

export function expiryWarnings(o: ExpiryWarningOptions) {
  const now = o.now ?? Date.now;
  const warnBeforeMs = o.warnBeforeMs ?? DEFAULT_WARN_BEFORE_MS;
  /** The deadline each running job was warned of, in this process. */
  const warned = new Map<string, number>();

  async function notify(
    job: { id: string; createdBy: string; project: string | null; application: string },
    expiresAt: number,
  ) {
    if (o.webhook === undefined) return;
    const body = {
      type: 'job.expiring',
      job: {
        id: job.id,
        owner: { createdBy: job.createdBy, ...(job.project !== null ? { project: job.project } : {}) },
        application: job.application,
      },
      expiresAt,
      minutesLeft: Math.max(0, Math.round((expiresAt - now()) / 60_000)),
    };
    try {
      const answer = await fetch(o.webhook, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
      });
      if (!answer.ok)
        o.log?.warn({ jobId: job.id, status: answer.status }, 'the expiry webhook refused a warning');
    } catch (err) {
      o.log?.warn({ err, jobId: job.id }, 'the expiry webhook could not be reached');
    }
  }

  /**
   * One pass over the running jobs whose deadline has come close, a page at a time: warns of each
   * deadline once. (Every running row each pass was, with the sampler's, most of what 10,000 live
   * jobs allocated.)
   */
  async function check(): Promise<void> {
    const ids = new Set<string>();
    const by = now() + warnBeforeMs;
    for await (const page of runningPages((after, limit) => o.store.jobs.expiringRows(by, after, limit))) {
      for (const job of page) {
        ids.add(job.id);
        await warnIfDue(job);
      }
    }
    for (const id of warned.keys()) if (!ids.has(id)) warned.delete(id);
  }

  async function warnIfDue(job: RunningJob): Promise<void> {
    const { expiresAt } = job;
    if (expiresAt === null || !warningDue(expiresAt, now(), warnBeforeMs) || warned.get(job.id) === expiresAt)
      return;
    warned.set(job.id, expiresAt);
    const text = expiryWarning(expiresAt);
    // Said before this process started (a restart): not again.
    if ((await o.store.jobs.updatesOf(job.id)).some((u) => u.status === text)) return;
    try {
      await o.addStatus(job.id, text);
    } catch (err) {
      o.log?.error({ err, jobId: job.id }, 'could not add the expiry warning');
    }
    await notify(job, expiresAt);
  }

  return { check, ...periodic(check, CHECK_EVERY_MS, 'warning of deadlines', o.log) };
}
