import { Watch } from '@kubernetes/client-node';
import type { Connection } from './connection.ts';
import { type Follower, follow } from './follow.ts';
import { OURS, POD_GROUP, VOLCANO_JOB } from './job-objects.ts';
import { type NodeSummary, summarizeNode } from './nodes.ts';
import {
  type JobSummary,
  type PodGroupSummary,
  type PodSummary,
  summarizeJob,
  summarizePod,
  summarizePodGroup,
} from './states.ts';

const LIST_PAGE = 500;

/** What the backend does with what the watches see. */
export interface WatchHandlers {
  jobChanged(job: JobSummary): void;
  jobDeleted(job: JobSummary): void;
  podChanged(pod: PodSummary): void;
  podDeleted(pod: PodSummary): void;
  groupChanged(group: PodGroupSummary): void;
  /** A list or watch failed; following goes on. */
  failed(what: string, error: unknown): void;
}

export interface Watches {
  /** Resolves once jobs, then pods and PodGroups, are listed a first time. */
  readonly listed: Promise<void>;
  /** The cluster's nodes, followed for utilization; submissions never wait for them. */
  readonly nodes: Follower<NodeSummary>;
  stop(): void;
}

/**
 * Follows ucompute's Volcano Jobs, their pods and PodGroups (in `scope`, or every namespace),
 * and the nodes, with one list-then-watch loop each.
 */
export function watchCluster(conn: Connection, scope: string | undefined, on: WatchHandlers): Watches {
  const watch = new Watch(conn.kubeConfig);
  const collection = (apiVersion: string, plural: string) =>
    `/${apiVersion.includes('/') ? 'apis' : 'api'}/${apiVersion}${scope ? `/namespaces/${scope}` : ''}/${plural}`;
  /**
   * Lists in pages, so that 10,000 jobs never sit in memory as one response: our objects in our
   * scope, or with `everything` every object of a cluster-scoped kind.
   */
  const lister =
    (apiVersion: string, kind: string, everything = false) =>
    async (page: (items: unknown[]) => void) => {
      let continueToken: string | undefined;
      let resourceVersion = '';
      do {
        const list = await conn.objects.list(
          apiVersion,
          kind,
          everything ? undefined : scope,
          undefined,
          undefined,
          undefined,
          undefined,
          everything ? undefined : OURS,
          LIST_PAGE,
          continueToken,
        );
        page(list.items);
        resourceVersion ||= list.metadata?.resourceVersion ?? '';
        continueToken =
          list.metadata?._continue ?? (list.metadata as { continue?: string } | undefined)?.continue;
      } while (continueToken);
      return resourceVersion;
    };
  const failed = (what: string) => (error: unknown) => on.failed(what, error);

  const jobs = follow<JobSummary>({
    what: 'Volcano Jobs',
    watch,
    path: collection(VOLCANO_JOB.apiVersion, 'jobs'),
    labelSelector: OURS,
    list: lister(VOLCANO_JOB.apiVersion, VOLCANO_JOB.kind),
    summarize: summarizeJob,
    changed: (_key, job) => on.jobChanged(job),
    deleted: (_key, job) => on.jobDeleted(job),
    failed: failed('Volcano Jobs'),
  });
  const pods = follow<PodSummary>({
    what: 'pods',
    watch,
    path: collection('v1', 'pods'),
    labelSelector: OURS,
    list: lister('v1', 'Pod'),
    summarize: summarizePod,
    changed: (_key, pod) => on.podChanged(pod),
    deleted: (_key, pod) => on.podDeleted(pod),
    failed: failed('pods'),
  });
  const groups = follow<PodGroupSummary>({
    what: 'PodGroups',
    watch,
    path: collection(POD_GROUP.apiVersion, 'podgroups'),
    labelSelector: OURS,
    list: lister(POD_GROUP.apiVersion, POD_GROUP.kind),
    summarize: summarizePodGroup,
    changed: (_key, group) => on.groupChanged(group),
    deleted: () => {},
    failed: failed('PodGroups'),
  });
  const nodes = follow<NodeSummary>({
    what: 'nodes',
    watch,
    path: '/api/v1/nodes',
    labelSelector: '',
    list: lister('v1', 'Node', true),
    summarize: summarizeNode,
    changed: () => {},
    deleted: () => {},
    failed: failed('nodes'),
  });
  const all = [jobs, pods, groups, nodes] as Follower<unknown>[];
  return {
    // Jobs first: pods and groups are kept only for jobs known (or being submitted).
    listed: jobs.ready.then(() => Promise.all([pods.ready, groups.ready])).then(() => {}),
    nodes,
    stop() {
      for (const f of all) f.stop();
    },
  };
}
