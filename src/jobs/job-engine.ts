import type { Clock } from '../model/clock.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import type { Transactional } from '../store/store.ts';
import { jobAccess } from './access.ts';
import type { Backend } from './backend.ts';
import type { PluginHooks } from './job-management.ts';
import type { Logger } from './log.ts';
import type { JobMirror } from './mirror.ts';
import { jobMonitor } from './monitor.ts';
import type { JobEnvironment } from './prepare.ts';
import type { QuotaProblemOf } from './quota-hold.ts';
import { jobRestarts } from './restarts.ts';
import { jobSubmission } from './submission.ts';
import type { UpdateListeners } from './update-listeners.ts';
import { jobUpdates } from './updates.ts';

// The parts that change jobs — updates through the state machine, monitoring (expiry, charges),
// submission and restarts — writing through one store. A replica has one for what its API is
// asked to do (on the store itself), and the leader one more for the backend loop (on the store
// fenced by its epoch, so that once deposed it writes nothing).

export interface EngineOptions {
  env: JobEnvironment;
  backend: Backend;
  hooks: PluginHooks;
  listeners: UpdateListeners;
  clock: Clock;
  requireCredits: boolean;
  submitRetryMs: number;
  storage?: JobStorage;
  log?: Logger;
  mirror?: JobMirror;
  /** Why a job's owner may not start jobs now (its storage quota): submission holds such jobs. */
  quotaProblem?: QuotaProblemOf;
}

export type JobEngine = ReturnType<typeof jobEngine>;

export function jobEngine(store: Transactional, o: EngineOptions) {
  const { env, backend, hooks, clock, log, mirror } = o;
  const access = jobAccess(store);
  const updates = jobUpdates({
    store,
    listeners: o.listeners,
    hooks,
    clock,
    lifecycle: () => monitoring.lifecycle,
    exited: (id) => {
      restarts
        .schedule(id)
        .catch((err: unknown) => log?.error({ err, jobId: id }, 'could not restart a job'));
    },
    ...(log ? { log } : {}),
    ...(mirror ? { mirror } : {}),
  });
  const monitoring = jobMonitor({
    store,
    env,
    backend,
    hooks,
    updates,
    access,
    now: () => clock.now(),
    requireCredits: o.requireCredits,
    ...(mirror ? { mirror } : {}),
  });
  const submission = jobSubmission({
    store,
    env,
    backend,
    hooks,
    updates,
    retryMs: o.submitRetryMs,
    clock,
    ...(o.quotaProblem ? { quotaProblem: o.quotaProblem } : {}),
    ...(o.storage ? { storage: o.storage } : {}),
    ...(log ? { log } : {}),
  });
  const restarts = jobRestarts({
    store,
    backend,
    updates,
    resubmit: submission.enqueue,
    clock,
    ...(log ? { log } : {}),
  });
  return { access, updates, monitoring, submission, restarts };
}
