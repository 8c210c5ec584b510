import type { RankUsage } from '../../jobs/backend.ts';
import { parseQuantity } from '../../volcano/api/quantity.ts';
import type { Connection } from './connection.ts';
import type { PodSummary } from './states.ts';

// What the ranks of running jobs use on the cluster, from the metrics API (metrics.k8s.io,
// served by metrics-server from the kubelets' summaries): one list per namespace for all of its
// jobs, each pod's containers summed. Without metrics-server there is nothing to report.

interface PodMetrics {
  metadata: { name: string; namespace?: string };
  containers?: { name: string; usage?: { cpu?: string; memory?: string } }[];
}

export function clusterUsage(conn: Connection, log?: { warn(obj: object, msg: string): void }) {
  let warned = false;

  async function namespaceMetrics(namespace: string): Promise<Map<string, PodMetrics>> {
    try {
      const list = (await conn.objects.list(
        'metrics.k8s.io/v1beta1',
        'PodMetrics',
        namespace,
      )) as unknown as {
        items: PodMetrics[];
      };
      return new Map(list.items.map((m) => [m.metadata.name, m]));
    } catch (err) {
      if (!warned)
        log?.warn({ err, namespace }, 'no pod metrics from metrics.k8s.io (is metrics-server running?)');
      warned = true;
      return new Map();
    }
  }

  /** Each job's ranks' use, from the pods given per job (those running). */
  return async (
    podsOfJobs: ReadonlyMap<string, readonly PodSummary[]>,
  ): Promise<Map<string, RankUsage[]>> => {
    const namespaces = new Set([...podsOfJobs.values()].flatMap((pods) => pods.map((p) => p.namespace)));
    const metrics = new Map(
      await Promise.all([...namespaces].map(async (ns) => [ns, await namespaceMetrics(ns)] as const)),
    );
    const usage = new Map<string, RankUsage[]>();
    for (const [jobId, pods] of podsOfJobs) {
      const ranks = pods.flatMap((pod): RankUsage[] => {
        const measured = metrics.get(pod.namespace)?.get(pod.name);
        if (!measured) return [];
        let cpu = 0;
        let memory = 0;
        for (const c of measured.containers ?? []) {
          cpu += c.usage?.cpu !== undefined ? parseQuantity(c.usage.cpu) : 0;
          memory += c.usage?.memory !== undefined ? parseQuantity(c.usage.memory) : 0;
        }
        return [{ rank: pod.rank, cpuCores: cpu, memoryBytes: Math.round(memory) }];
      });
      if (ranks.length > 0)
        usage.set(
          jobId,
          ranks.sort((a, b) => a.rank - b.rank),
        );
    }
    return usage;
  };
}
