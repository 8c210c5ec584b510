import type { SecurityPolicy } from '../../model/config.ts';
import { IssueList, joinPath } from '../../model/errors.ts';
import type { Companion, VolcanoJob } from '../api/types.ts';
import { checkPrivileged } from '../privileged.ts';
import { checkJobFields, checkPodFields, checkTaskFields } from './local-limits.ts';
import { jobPlugins } from './plugins/index.ts';

/**
 * A Volcano Job manifest as a user writes it (`ucompute vcjob run`), checked field by field for
 * what the local backend relies on, what Volcano's admission webhook would refuse, what the local
 * backend cannot honour, and the privileged features the operator has not allowed; every problem
 * names its field, all at once. The companions it may carry are ConfigMaps and Secrets for the
 * job's volumes.
 */

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const EVENTS = [
  '*',
  'PodFailed',
  'PodEvicted',
  'PodPending',
  'Unknown',
  'TaskCompleted',
  'TaskFailed',
  'JobUpdated',
];
const ACTIONS = [
  'AbortJob',
  'RestartJob',
  'RestartTask',
  'RestartPod',
  'TerminateJob',
  'CompleteJob',
  'ResumeJob',
];

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown) => Number.isInteger(v) && (v as number) >= 0;

export interface Manifest {
  /** In the order of the documents; their names differ. */
  jobs: VolcanoJob[];
  companions: Companion[];
}

/**
 * The Volcano Jobs among the documents (as `kubectl apply -f` creates every one of them), with
 * the ConfigMaps and Secrets they share; other kinds are errors.
 */
export function readManifest(documents: unknown[], source: string, security: SecurityPolicy): Manifest {
  const issues = new IssueList();
  const jobs: VolcanoJob[] = [];
  const names = new Map<string, string>();
  const companions: Companion[] = [];
  documents.forEach((doc, i) => {
    const at = documents.length > 1 ? `${source}[${i}]` : source;
    if (doc === null || doc === undefined) return;
    if (!isObject(doc)) {
      issues.add(at, 'must be a Kubernetes object');
      return;
    }
    if (doc.apiVersion === 'batch.volcano.sh/v1alpha1' && doc.kind === 'Job') {
      checkJob(doc, at, security, issues);
      const name = (doc.metadata as Json | undefined)?.name;
      if (typeof name === 'string' && names.has(name)) {
        issues.add(
          joinPath(at, 'metadata.name'),
          `repeats the name of the Job at ${names.get(name)}: each Job needs its own`,
        );
      } else if (typeof name === 'string') names.set(name, at);
      jobs.push(doc as unknown as VolcanoJob);
    } else if (doc.apiVersion === 'v1' && (doc.kind === 'ConfigMap' || doc.kind === 'Secret')) {
      companions.push(doc as unknown as Companion);
    } else {
      issues.add(
        `${at}.kind`,
        `the local backend runs a batch.volcano.sh/v1alpha1 Job with ConfigMaps and Secrets, not ${String(doc.apiVersion)} ${String(doc.kind)}`,
      );
    }
  });
  if (jobs.length === 0 && issues.issues.length === 0) {
    issues.add(source, 'must hold a Volcano Job (batch.volcano.sh/v1alpha1, kind Job); it holds none');
  }
  issues.throwIfAny();
  return { jobs, companions };
}

function checkJob(doc: Json, at: string, security: SecurityPolicy, issues: IssueList): void {
  const meta = doc.metadata;
  if (isObject(meta) && meta.name === undefined && meta.generateName !== undefined) {
    issues.add(
      joinPath(at, 'metadata.generateName'),
      'is not offered by the local backend: give the job a metadata.name (a DNS label)',
    );
  } else if (!isObject(meta) || typeof meta.name !== 'string' || !DNS_LABEL.test(meta.name)) {
    issues.add(joinPath(at, 'metadata.name'), 'must be a DNS label (lower-case letters, digits and -)');
  }
  const spec = doc.spec;
  if (!isObject(spec)) {
    issues.add(joinPath(at, 'spec'), 'is required');
    return;
  }
  const s = joinPath(at, 'spec');
  for (const key of ['minAvailable', 'maxRetry', 'minSuccess'] as const) {
    if (spec[key] !== undefined && !isCount(spec[key]))
      issues.add(joinPath(s, key), 'must be a whole number ≥ 0');
  }
  checkJobFields(spec, s, issues);
  checkPolicies(spec.policies, joinPath(s, 'policies'), issues);
  if (spec.plugins !== undefined) {
    if (!isObject(spec.plugins))
      issues.add(joinPath(s, 'plugins'), 'must map plugin names to argument lists');
    else {
      try {
        jobPlugins(doc as unknown as VolcanoJob);
      } catch (e) {
        issues.add(joinPath(s, 'plugins'), (e as Error).message.replace(/^spec\.plugins\.\S+: /, ''));
      }
    }
  }
  const tasks = spec.tasks;
  if (!Array.isArray(tasks) || tasks.length === 0) {
    issues.add(joinPath(s, 'tasks'), 'must list at least one task');
    return;
  }
  const names = new Set<string>();
  let replicas = 0;
  tasks.forEach((task, i) => {
    const t = joinPath(joinPath(s, 'tasks'), i);
    if (!isObject(task)) {
      issues.add(t, 'must be a task');
      return;
    }
    if (typeof task.name !== 'string' || !DNS_LABEL.test(task.name))
      issues.add(joinPath(t, 'name'), 'must be a DNS label');
    else if (names.has(task.name)) issues.add(joinPath(t, 'name'), `repeats the task name ${task.name}`);
    else names.add(task.name);
    if (!isCount(task.replicas)) issues.add(joinPath(t, 'replicas'), 'must be a whole number ≥ 0');
    else replicas += task.replicas as number;
    if (
      task.minAvailable !== undefined &&
      (!isCount(task.minAvailable) || (task.minAvailable as number) > (task.replicas as number))
    ) {
      issues.add(joinPath(t, 'minAvailable'), 'must be a whole number between 0 and replicas');
    }
    checkTaskFields(task, t, issues);
    checkPolicies(task.policies, joinPath(t, 'policies'), issues);
    const pod = isObject(task.template) ? task.template.spec : undefined;
    if (!isObject(pod)) {
      issues.add(joinPath(t, 'template.spec'), 'is required');
      return;
    }
    checkPodFields(pod, joinPath(t, 'template.spec'), issues);
    checkPrivileged(pod, joinPath(t, 'template.spec'), security, issues);
    const containers = pod.containers;
    if (!Array.isArray(containers) || containers.length === 0) {
      issues.add(joinPath(t, 'template.spec.containers'), 'must list at least one container');
      return;
    }
    for (const [list, items] of [
      ['containers', containers],
      ['initContainers', pod.initContainers ?? []],
    ] as const) {
      if (!Array.isArray(items)) continue;
      items.forEach((c: unknown, j: number) => {
        const p = joinPath(joinPath(t, `template.spec.${list}`), j);
        if (!isObject(c)) {
          issues.add(p, 'must be a container');
          return;
        }
        if (typeof c.name !== 'string' || c.name === '') issues.add(joinPath(p, 'name'), 'is required');
        if (typeof c.image !== 'string' || c.image === '') issues.add(joinPath(p, 'image'), 'is required');
        for (const key of ['command', 'args'] as const) {
          const v = c[key];
          if (v !== undefined && !(Array.isArray(v) && v.every((a) => typeof a === 'string'))) {
            issues.add(joinPath(p, key), 'must be a list of strings');
          }
        }
      });
    }
  });
  checkDependsOn(tasks, joinPath(s, 'tasks'), issues);
  if (isCount(spec.minAvailable) && (spec.minAvailable as number) > replicas) {
    issues.add(joinPath(s, 'minAvailable'), `must not exceed the ${replicas} replicas of the job`);
  }
}

/** `dependsOn` names other tasks of the job, and the dependencies form no cycle (admission's rule). */
function checkDependsOn(tasks: unknown[], at: string, issues: IssueList): void {
  const edges = new Map<string, string[]>();
  tasks.forEach((task, i) => {
    if (!isObject(task) || task.dependsOn === undefined) return;
    const where = joinPath(joinPath(at, i), 'dependsOn');
    const d = task.dependsOn;
    if (!isObject(d) || !Array.isArray(d.name) || d.name.length === 0) {
      issues.add(joinPath(where, 'name'), 'must list the tasks this task waits for');
      return;
    }
    if (d.iteration !== undefined && d.iteration !== 'any' && d.iteration !== 'all') {
      issues.add(joinPath(where, 'iteration'), 'must be any or all');
    }
    const known = tasks.flatMap((t) => (isObject(t) && typeof t.name === 'string' ? [t.name] : []));
    for (const name of d.name) {
      if (typeof name !== 'string' || !known.includes(name) || name === task.name) {
        issues.add(joinPath(where, 'name'), `names no other task of the job (${String(name)})`);
      }
    }
    if (typeof task.name === 'string')
      edges.set(
        task.name,
        d.name.filter((n) => typeof n === 'string'),
      );
  });
  const visiting = new Set<string>();
  const done = new Set<string>();
  const cyclic = (name: string): boolean => {
    if (done.has(name)) return false;
    if (visiting.has(name)) return true;
    visiting.add(name);
    const found = (edges.get(name) ?? []).some(cyclic);
    visiting.delete(name);
    done.add(name);
    return found;
  };
  for (const name of edges.keys()) {
    if (cyclic(name)) {
      issues.add(at, `the tasks' dependsOn form a cycle (through ${name})`);
      return;
    }
  }
}

/** Admission's policy rules: known events and actions, no event or exit code twice, `*` alone. */
function checkPolicies(policies: unknown, at: string, issues: IssueList): void {
  if (policies === undefined) return;
  if (!Array.isArray(policies)) {
    issues.add(at, 'must be a list of policies');
    return;
  }
  const seenEvents = new Set<string>();
  const seenCodes = new Set<unknown>();
  policies.forEach((p: unknown, i) => {
    const where = joinPath(at, i);
    if (!isObject(p)) {
      issues.add(where, 'must be a policy');
      return;
    }
    if (typeof p.action !== 'string' || !ACTIONS.includes(p.action)) {
      issues.add(joinPath(where, 'action'), `must be one of ${ACTIONS.join(', ')}`);
    }
    const events = [
      ...(p.event !== undefined ? [p.event] : []),
      ...(Array.isArray(p.events) ? p.events : []),
    ];
    for (const e of events) {
      if (typeof e !== 'string' || !EVENTS.includes(e))
        issues.add(joinPath(where, 'event'), `must be one of ${EVENTS.join(', ')}`);
      else if (seenEvents.has(e))
        issues.add(joinPath(where, 'event'), `repeats the event ${e}: one event has one action`);
      else seenEvents.add(e);
    }
    if (p.exitCode !== undefined) {
      if (!Number.isInteger(p.exitCode) || p.exitCode === 0)
        issues.add(joinPath(where, 'exitCode'), 'must be a non-zero whole number');
      else if (events.length > 0)
        issues.add(joinPath(where, 'exitCode'), 'must not be given with an event in the same policy');
      else if (seenCodes.has(p.exitCode))
        issues.add(joinPath(where, 'exitCode'), `repeats the exit code ${String(p.exitCode)}`);
      else seenCodes.add(p.exitCode);
    }
    if (events.length === 0 && p.exitCode === undefined)
      issues.add(where, 'needs an event, events or an exitCode');
    if (p.timeout !== undefined) {
      issues.add(joinPath(where, 'timeout'), 'the local backend cannot honour delayed actions; remove it');
    }
  });
  if (seenEvents.has('*') && seenEvents.size > 1) {
    issues.add(at, 'a policy for every event (*) must be the only one');
  }
}
