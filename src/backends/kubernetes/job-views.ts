import type { Duplex } from 'node:stream';
import type { BackendEvent } from '../../jobs/backend.ts';
import type { JobSummary, PodGroupSummary, PodSummary } from './states.ts';

/** What the Kubernetes backend keeps of one job: the summaries its watches saw, and who waits on them. */
export interface JobView {
  job?: JobSummary;
  pods: Map<number, PodSummary>;
  group?: PodGroupSummary;
  reported?: { state: BackendEvent['state']; status: string };
  /** Ended (reported and being removed) or cancelled: nothing more is reported. */
  done: boolean;
  /** Since when Volcano has admitted it without creating its pods (decisions.ts podlessSince). */
  podlessSince?: number;
  /** Called on every change of its pods and when it ends (followers of its logs, streams to it). */
  waiters: Set<() => void>;
}

export const newJobView = (): JobView => ({ pods: new Map(), done: false, waiters: new Set() });

export function wake(view: JobView): void {
  for (const w of view.waiters) w();
}

/**
 * A rank's pod once its container runs. The job's phase and its pods come on different
 * watches, so a job just seen running may wait a moment (at most `timeoutMs`) for its pods' news.
 */
export async function runningPod(
  views: ReadonlyMap<string, JobView>,
  jobId: string,
  rank: number,
  timeoutMs: number,
): Promise<PodSummary> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const view = views.get(jobId);
    const pod = view?.pods.get(rank);
    if (pod?.started && !pod.ended) return pod;
    const left = deadline - performance.now();
    const starting = view?.job?.phase === 'Running' && !view.done && !pod?.ended;
    if (!starting || left <= 0) throw new Error(`rank ${rank} of job ${jobId} is not running`);
    await new Promise<void>((resolve) => {
      const woken = () => {
        clearTimeout(timer);
        view.waiters.delete(woken);
        resolve();
      };
      const timer = setTimeout(woken, left);
      view.waiters.add(woken);
    });
  }
}

/**
 * Closes a stream to a rank once the rank or its job has ended, so that nothing the proxy keeps
 * (a pooled port-forward, a relay) outlives the pod it reached.
 */
export function closedWithPod<S extends Duplex>(view: JobView | undefined, rank: number, stream: S): S {
  if (!view) return stream;
  const check = () => {
    const pod = view.pods.get(rank);
    if (view.done || !pod || pod.ended) stream.destroy();
  };
  view.waiters.add(check);
  stream.once('close', () => view.waiters.delete(check));
  return stream;
}
