/**
 * A test-side stand-in for Volcano's job controller and scheduler on the fake API server: it
 * gives each new Volcano Job a PodGroup and the Pending phase, and lets a test move the job on
 * (admit → pods, run, exits, evictions, OOM kills, lost nodes, phases) the way Volcano would.
 * With `autopilot`, every job is admitted, runs and completes with exit code 0 on its own.
 * Like Volcano, it opens new queues and refuses jobs for queues that are not open yet.
 */
import type { FakeApiServer, Obj } from './api-server.ts';

const JOB_ID_LABEL = 'ucompute.dev/job-id';

export interface VolcanoStandIn {
  /** The Volcano Job, once the controller has given it its PodGroup and the Pending phase. */
  job(jobId: string): Obj | undefined;
  pod(jobId: string, rank: number): Obj | undefined;
  /** The gang cannot be placed: the PodGroup's Unschedulable condition. */
  unschedulable(jobId: string, message: string): void;
  /** The scheduler admitted the gang: pods are created, still Pending. */
  admit(jobId: string): void;
  /**
   * The scheduler admitted the gang (PodGroup Inqueue) but the controller never creates its pods:
   * Volcano 1.10 when its PodGroup informer first saw the Inqueue group by a re-list.
   */
  strand(jobId: string): void;
  /** Every pod runs and is ready; the job is Running. */
  run(jobId: string): void;
  /** One rank's user container ended (at `at`, ms since the epoch: now by default). */
  exit(jobId: string, rank: number, exitCode: number, reason?: string, at?: number): void;
  evict(jobId: string, rank: number): void;
  loseNode(jobId: string, rank: number): void;
  /** Deletes a pod as someone other than Volcano would (no out-of-sync mark). */
  deletePod(jobId: string, rank: number): void;
  phase(jobId: string, phase: string, reason?: string, message?: string): void;
  /** Runs to the end: each rank exits with its code (at `at`), then Completed (all 0) or Terminated. */
  finish(jobId: string, exitCodes: number[], at?: number): void;
}

export interface StandInOptions {
  autopilot?: boolean;
  /** Time between the autopilot's steps. */
  stepMs?: number;
}

export function volcanoStandIn(api: FakeApiServer, options: StandInOptions = {}): VolcanoStandIn {
  const jobs = new Map<string, { namespace: string; name: string }>();

  const job = (jobId: string) => {
    const where = jobs.get(jobId);
    return where ? api.get('jobs', where.namespace, where.name) : undefined;
  };
  const replicas = (j: Obj): number => j.spec.tasks[0].replicas;
  const podName = (j: Obj, rank: number) => `${j.metadata.name}-${j.spec.tasks[0].name}-${rank}`;
  const pod = (jobId: string, rank: number) => {
    const j = job(jobId);
    return j ? api.get('pods', j.metadata.namespace, podName(j, rank)) : undefined;
  };
  const pods = (jobId: string) => {
    const j = job(jobId);
    return j ? Array.from({ length: replicas(j) }, (_, r) => pod(jobId, r)).filter(Boolean) : [];
  };

  function setStatus(jobId: string, change: (status: Obj) => void): void {
    const j = structuredClone(job(jobId));
    if (!j) return;
    j.status ??= { state: { phase: 'Pending' }, minAvailable: j.spec.minAvailable };
    change(j.status);
    api.apply('jobs', j);
  }

  function setPod(jobId: string, rank: number, change: (p: Obj) => void): void {
    const p = structuredClone(pod(jobId, rank));
    if (!p) return;
    change(p);
    api.apply('pods', p);
  }

  function counts(jobId: string): void {
    setStatus(jobId, (s) => {
      const all = pods(jobId);
      s.running = all.filter((p) => p.status.phase === 'Running').length;
      s.pending = all.filter((p) => p.status.phase === 'Pending').length;
      s.succeeded = all.filter((p) => p.status.phase === 'Succeeded').length;
      s.failed = all.filter((p) => p.status.phase === 'Failed').length;
    });
  }

  const terminated = (exitCode: number, reason: string, at = Date.now()) => ({
    name: 'user-job',
    ready: false,
    restartCount: 0,
    image: 'x',
    imageID: '',
    state: {
      terminated: {
        exitCode,
        reason,
        startedAt: new Date(at).toISOString(),
        finishedAt: new Date(at).toISOString(),
      },
    },
  });

  const standIn: VolcanoStandIn = {
    job,
    pod,
    unschedulable(jobId, message) {
      const j = job(jobId);
      if (!j) return;
      const group = api.get('podgroups', j.metadata.namespace, `${j.metadata.name}-${j.metadata.uid}`);
      const next = structuredClone(group);
      next.status = {
        phase: 'Pending',
        conditions: [
          { type: 'Unschedulable', status: 'True', reason: 'NotEnoughResources', message, transitionID: 't' },
        ],
      };
      api.apply('podgroups', next);
    },
    strand(jobId) {
      const j = job(jobId);
      if (!j) return;
      const group = structuredClone(
        api.get('podgroups', j.metadata.namespace, `${j.metadata.name}-${j.metadata.uid}`),
      );
      group.status = { phase: 'Inqueue' };
      api.apply('podgroups', group);
    },
    admit(jobId) {
      const j = job(jobId);
      if (!j) return;
      standIn.strand(jobId);
      const task = j.spec.tasks[0];
      for (let rank = 0; rank < task.replicas; rank++) {
        api.apply('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: podName(j, rank),
            namespace: j.metadata.namespace,
            labels: {
              ...task.template.metadata?.labels,
              'volcano.sh/job-name': j.metadata.name,
              'volcano.sh/job-namespace': j.metadata.namespace,
              'volcano.sh/task-index': String(rank),
              'volcano.sh/task-spec': task.name,
              'volcano.sh/queue-name': j.spec.queue,
            },
            annotations: { 'volcano.sh/task-index': String(rank), 'volcano.sh/job-name': j.metadata.name },
          },
          spec: structuredClone(task.template.spec),
          status: {
            phase: 'Pending',
            conditions: [{ type: 'PodScheduled', status: 'True' }],
          },
        });
      }
      counts(jobId);
    },
    run(jobId) {
      const j = job(jobId);
      if (!j) return;
      for (let rank = 0; rank < replicas(j); rank++) {
        setPod(jobId, rank, (p) => {
          p.spec.nodeName = `node-${rank}`;
          p.status = {
            phase: 'Running',
            podIP: `10.0.0.${10 + rank}`,
            conditions: [
              { type: 'PodScheduled', status: 'True' },
              { type: 'Ready', status: 'True' },
            ],
            containerStatuses: [
              {
                name: 'user-job',
                ready: true,
                restartCount: 0,
                image: 'x',
                imageID: '',
                state: { running: { startedAt: new Date().toISOString() } },
              },
            ],
          };
        });
      }
      counts(jobId);
      setStatus(jobId, (s) => {
        s.state = { phase: 'Running' };
      });
    },
    exit(jobId, rank, exitCode, reason, at) {
      setPod(jobId, rank, (p) => {
        p.status.phase = exitCode === 0 ? 'Succeeded' : 'Failed';
        p.status.conditions = [{ type: 'Ready', status: 'False' }];
        p.status.containerStatuses = [
          terminated(exitCode, reason ?? (exitCode === 0 ? 'Completed' : 'Error'), at),
        ];
      });
      const j = job(jobId);
      if (j) api.endLog(j.metadata.namespace, podName(j, rank));
      counts(jobId);
    },
    evict(jobId, rank) {
      setPod(jobId, rank, (p) => {
        p.status.phase = 'Failed';
        p.status.reason = 'Evicted';
        p.status.message = 'The node was low on resource: memory.';
        p.status.conditions = [{ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet' }];
        p.status.containerStatuses = [terminated(137, 'Error')];
      });
      counts(jobId);
    },
    loseNode(jobId, rank) {
      setPod(jobId, rank, (p) => {
        p.status.phase = 'Unknown';
        p.status.reason = 'NodeLost';
        p.status.message = `Node node-${rank} which was running pod ${p.metadata.name} is unresponsive`;
        p.status.conditions = [{ type: 'Ready', status: 'Unknown' }];
      });
      counts(jobId);
    },
    deletePod(jobId, rank) {
      const p = pod(jobId, rank);
      if (p) api.remove('pods', p.metadata.namespace, p.metadata.name);
    },
    phase(jobId, phase, reason, message) {
      setStatus(jobId, (s) => {
        s.state = { phase, ...(reason ? { reason } : {}), ...(message ? { message } : {}) };
      });
    },
    finish(jobId, exitCodes, at) {
      for (const [rank, code] of exitCodes.entries()) standIn.exit(jobId, rank, code, undefined, at);
      standIn.phase(jobId, exitCodes.every((c) => c === 0) ? 'Completed' : 'Terminated');
    },
  };

  // Volcano's queue controller opens a new queue a moment after it is created; until then its
  // admission webhook refuses the queue's jobs (the first job of a new owner must wait).
  api.onChange((type, plural, object) => {
    if (plural !== 'queues' || type !== 'ADDED' || object.status?.state) return;
    setImmediate(() => api.apply('queues', { ...structuredClone(object), status: { state: 'Open' } }));
  });
  api.admission((plural, object) => {
    if (plural !== 'jobs') return undefined;
    const queue = api.get('queues', undefined, object.spec?.queue ?? 'default');
    if (!queue || queue.status?.state === 'Open') return undefined;
    return (
      'admission webhook "validatejob.volcano.sh" denied the request: can only submit job to queue with state `Open`, ' +
      `queue \`${queue.metadata.name}\` status is \`${queue.status?.state ?? ''}\`;`
    );
  });

  api.onChange((type, plural, object) => {
    if (plural !== 'jobs') return;
    const jobId = object.metadata.labels?.[JOB_ID_LABEL];
    if (!jobId) return;
    if (type === 'DELETED') {
      // Kubernetes' garbage collector: the job's pods and PodGroup go with it.
      for (const p of api.list('pods', object.metadata.namespace))
        if (p.metadata.labels?.['volcano.sh/job-name'] === object.metadata.name)
          api.remove('pods', p.metadata.namespace, p.metadata.name);
      api.remove('podgroups', object.metadata.namespace, `${object.metadata.name}-${object.metadata.uid}`);
      jobs.delete(jobId);
      return;
    }
    if (type !== 'ADDED' || jobs.has(jobId)) return;
    // After the client's create answered: the controller reacts a moment later. The stand-in
    // knows the job from then on, so that a test that sees it may admit it at once.
    setImmediate(() => {
      const { namespace, name, uid } = object.metadata;
      if (api.get('jobs', namespace, name)?.metadata.uid !== uid) return; // deleted meanwhile
      jobs.set(jobId, { namespace, name });
      api.apply('podgroups', {
        apiVersion: 'scheduling.volcano.sh/v1beta1',
        kind: 'PodGroup',
        metadata: {
          name: `${object.metadata.name}-${object.metadata.uid}`,
          namespace: object.metadata.namespace,
          labels: { ...object.metadata.labels },
          annotations: { ...object.metadata.annotations },
        },
        spec: { minMember: object.spec.minAvailable, queue: object.spec.queue },
        status: { phase: 'Pending' },
      });
      standIn.phase(jobId, 'Pending');
      if (options.autopilot) {
        // A few milliseconds apart, so that a follower sees each phase.
        const steps = [
          () => standIn.admit(jobId),
          () => standIn.run(jobId),
          () =>
            standIn.finish(
              jobId,
              Array.from({ length: replicas(object) }, () => 0),
            ),
        ];
        const next = () => {
          steps.shift()?.();
          if (steps.length > 0) setTimeout(next, options.stepMs ?? 10);
        };
        setTimeout(next, options.stepMs ?? 10);
      }
    });
  });

  return standIn;
}
