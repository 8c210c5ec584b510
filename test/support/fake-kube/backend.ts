/**
 * A kubernetes backend in the test's own process, on a fake cluster. Apart from
 * cluster.ts: the backend loads @kubernetes/client-node (~0.4 CPU-s a process), which the
 * tests that only run `ucompute serve` on the fake cluster do not need.
 */
import type { TestContext } from 'node:test';
import { kubernetesBackend } from '../../../src/backends/kubernetes/kubernetes-backend.ts';
import type { Config } from '../../../src/config/config.ts';
import type { BackendEvent } from '../../../src/jobs/backend.ts';
import { resolvePipelineConfig } from '../../../src/model/config.ts';
import type { JobStorage } from '../../../src/storage/job-storage.ts';
import type { FakeCluster } from './cluster.ts';

/** A kubernetes backend on the fake cluster, its events collected; closed after the test. */
export function backendOn(t: TestContext, cluster: FakeCluster, extra: Config = {}, storage?: JobStorage) {
  const config = cluster.config(extra);
  const backend = kubernetesBackend({
    config: resolvePipelineConfig(config),
    settings: config.kubernetes,
    ...(storage ? { storage } : {}),
  });
  const events: BackendEvent[] = [];
  const waiters = new Set<() => void>();
  backend.onEvent((e) => {
    events.push(e);
    for (const w of waiters) w();
  });
  t.after(() => backend.close());
  /** Waits (bounded, generously: the fake API server is slow on a loaded machine) until an event matches. */
  async function event(predicate: (e: BackendEvent) => boolean, timeoutMs = 30_000): Promise<BackendEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = events.find(predicate);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no such event within ${timeoutMs} ms; got ${JSON.stringify(events)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      waiters.clear();
    }
  }
  return { backend, events, event };
}
