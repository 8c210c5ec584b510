import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { Backend, BackendEvent, BackendEventListener } from '../src/jobs/backend.ts';
import { jobEngine } from '../src/jobs/job-engine.ts';
import { pluginHooks } from '../src/jobs/job-management.ts';
import type { Logger } from '../src/jobs/log.ts';
import { createJobService } from '../src/jobs/service.ts';
import { updateListeners } from '../src/jobs/update-listeners.ts';
import { systemClock } from '../src/model/clock.ts';
import { PLUGINS } from '../src/plugins/index.ts';
import type { JobPlugin } from '../src/plugins/plugin.ts';
import type { Store } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';
import { until } from './support/until.ts';

// A job whose build a leader saved, and which it handed to the backend before it was stopped
// (killed, paused) without marking it submitted, is submitted again by the next leader. If that
// one's batch waits for its other jobs (their onCreate) while the backend runs the job to its end
// and removes it once the end is written, the job must not be made a second time.

const terminal = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

/**
 * One cluster that both leaders' backends reach, as a Kubernetes cluster: a job made once stays
 * until its end is written (then its objects are removed), and a submit of a job it has is
 * harmless. Counts how often each job was made.
 */
function cluster() {
  const has = new Set<string>();
  const made = new Map<string, number>();
  /** A leader's view of it; `stalls`: its submits never answer (the leader stopped meanwhile). */
  function backend(o: { stalls?: boolean } = {}): Backend & {
    finish(jobId: string): Promise<void>;
  } {
    const listeners: BackendEventListener[] = [];
    const tell = async (e: BackendEvent) => {
      let written = false;
      for (const l of listeners) written = (await l(e)) === true || written;
      return written;
    };
    return {
      ...dryBackend({ runForMs: null }),
      async submit(jobId) {
        if (!has.has(jobId)) {
          has.add(jobId);
          made.set(jobId, (made.get(jobId) ?? 0) + 1);
        }
        if (o.stalls) await new Promise<never>(() => {});
      },
      async cancel(jobId) {
        has.delete(jobId);
      },
      async suspend(jobId) {
        has.delete(jobId);
      },
      async knownJobs() {
        return new Set(has);
      },
      onEvent(listener) {
        listeners.push(listener);
      },
      /** The job runs to its end; its objects are removed once its end is written. */
      async finish(jobId) {
        await tell({ jobId, state: 'RUNNING', status: 'running', at: Date.now() });
        const written = await tell({
          jobId,
          state: 'SUCCESS',
          status: 'done',
          exitCodes: { 0: 0 },
          at: Date.now(),
        });
        if (written) has.delete(jobId);
      },
    };
  }
  return { backend, has: (id: string) => has.has(id), made: (id: string) => made.get(id) ?? 0 };
}

/** A leader's backend loop on the store (the submission and the updates of a replica that leads). */
function leader(store: Store, backend: Backend, plugins: readonly JobPlugin[], log?: Logger) {
  const engine = jobEngine(store, {
    ...(log ? { log } : {}),
    env: env(),
    backend,
    hooks: pluginHooks(plugins),
    listeners: updateListeners(),
    clock: systemClock,
    requireCredits: false,
    submitRetryMs: 1,
  });
  backend.onEvent((e) => engine.updates.onBackendEvent(e));
  return engine;
}

/** A replica that only accepts: the jobs wait in the store for a leader. */
function acceptingReplica(store: Store) {
  return createJobService({
    store,
    env: env(),
    backend: dryBackend(),
    replicated: true,
    requireCredits: false,
  });
}

/** A gate that onCreate waits at until opened. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

for (const kind of STORE_KINDS) {
  test(`[${kind}] a job built by a stopped leader that ends while its next submission batch waits is not made again`, async () => {
    const store = await openTestStore(kind);
    const k8s = cluster();
    const stalled = k8s.backend({ stalls: true });
    const next = k8s.backend();
    const first = gate();
    const second = gate();
    const waitsAt = new Map<string, Promise<void>>();
    const creating = new Set<string>();
    const plugins: JobPlugin[] = [
      ...PLUGINS,
      {
        name: 'Gate',
        async onCreate(_ctx, job) {
          creating.add(job.id);
          await waitsAt.get(job.id);
        },
      },
    ];
    const follower = acceptingReplica(store);
    const a = leader(store, stalled, plugins);
    let b: ReturnType<typeof leader> | undefined;
    try {
      await store.users.createUser('alice', false);
      const alice = { username: 'alice', admin: false };
      const [job] = await follower.create(alice, [terminal]);
      const [one, two, other] = await follower.create(alice, [terminal, terminal, terminal]);
      // The first leader builds the job, saves its build and makes it on the cluster; it is stopped
      // before it marks the job submitted.
      a.submission.enqueue(job!);
      await until(async () => (await store.jobs.get(job!))?.annotations != null && k8s.has(job!), {
        describe: 'the first leader saved the build and made the job',
      });
      a.submission.stop();
      assert.equal((await store.jobs.get(job!))?.submitted, false);

      // The next leader: two batches under way (each held at onCreate), then the job and another
      // queued behind them go together in the next batch, which waits at the other's onCreate.
      waitsAt.set(one!, first.opened);
      waitsAt.set(two!, first.opened);
      waitsAt.set(other!, second.opened);
      b = leader(store, next, plugins);
      for (const id of [one!, two!, job!, other!]) b.submission.enqueue(id);
      await until(() => creating.has(one!) && creating.has(two!), { describe: 'two batches under way' });
      first.open();
      await until(() => creating.has(other!), { describe: 'the job’s batch waits at the other’s onCreate' });

      // Meanwhile the cluster runs the job to its end; once its end is written, it is removed.
      await next.finish(job!);
      assert.equal((await store.jobs.get(job!))?.state, 'SUCCESS');
      assert.equal(k8s.has(job!), false);

      second.open();
      await until(async () => (await store.jobs.get(other!))?.submitted === true, {
        describe: 'the batch is handed to the backend and marked submitted',
      });
      assert.equal(k8s.made(other!), 1);
      assert.equal(k8s.made(job!), 1, 'the ended job was made once only, by the first leader');
      assert.equal(k8s.has(job!), false, 'nothing of the ended job is left on the cluster');
    } finally {
      first.open();
      second.open();
      b?.submission.stop();
      await b?.updates.stop();
      await a.updates.stop();
      await follower.stop();
      await store.close();
    }
  });
}

for (const kind of STORE_KINDS) {
  test(`[${kind}] a job the backend refuses while the leader steps down stays queued for the next leader`, async () => {
    const store = await openTestStore(kind);
    const refusal = gate();
    let asked = false;
    const backend: Backend = {
      ...dryBackend({ runForMs: null }),
      async submit() {
        asked = true;
        await refusal.opened;
        throw new Error('this replica no longer leads: the leader submits the job');
      },
    };
    const follower = acceptingReplica(store);
    // What the leader's log says it left queued.
    const left: string[] = [];
    const log: Logger = {
      info: (o) => void left.push(String((o as { jobId?: string }).jobId)),
      warn() {},
      error() {},
    };
    const a = leader(store, backend, PLUGINS, log);
    try {
      await store.users.createUser('alice', false);
      const [job] = await follower.create({ username: 'alice', admin: false }, [terminal]);
      a.submission.enqueue(job!);
      await until(() => asked, { describe: 'the backend is asked' });
      // Deposed while the backend is asked; then it refuses (the replica no longer leads).
      a.submission.stop();
      refusal.open();
      await until(async () => left.includes(job!) || (await store.jobs.get(job!))?.state === 'FAILURE', {
        describe: 'the refusal is handled: the job left queued, or failed',
      });
      const after = await store.jobs.get(job!);
      assert.equal(after?.state, 'IN_QUEUE', 'not failed: the next leader submits it');
      assert.equal(after?.submitted, false);
    } finally {
      refusal.open();
      await a.updates.stop();
      await follower.stop();
      await store.close();
    }
  });
}
