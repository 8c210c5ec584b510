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

  /**
   * The use of the ranks of `jobIds`, from their running pods (`podsOf`: a job's pods by rank, as
   * the backend follows them). The metrics are listed first, and the jobs visited once more only
   * when a namespace reported any: without metrics-server (or with nothing measured yet) a pass
   * over thousands of live jobs allocates nothing per job — the sampler asks every 5 s.
   */
  return async (
    jobIds: readonly string[],
    podsOf: (jobId: string) => ReadonlyMap<number, PodSummary> | undefined,
  ): Promise<Map<string, RankUsage[]>> => {
    const usage = new Map<string, RankUsage[]>();
    const namespaces = new Set<string>();
    // forEach with one callback: an iterator per job was most of what this pass allocated.
    const running = (pod: PodSummary) => {
      if (pod.phase === 'Running') namespaces.add(pod.namespace);
    };
    for (const id of jobIds) podsOf(id)?.forEach(running);
    if (namespaces.size === 0) return usage;
    const listed = await Promise.all(
      [...namespaces].map(async (ns) => [ns, await namespaceMetrics(ns)] as const),
    );
    const metrics = new Map(listed.filter(([, byPod]) => byPod.size > 0));
    if (metrics.size === 0) return usage;
    for (const id of jobIds) {
      const pods = podsOf(id);
      if (!pods) continue;
      let ranks: RankUsage[] | undefined;
      for (const pod of pods.values()) {
        const measured = pod.phase === 'Running' ? metrics.get(pod.namespace)?.get(pod.name) : undefined;
        if (!measured) continue;
        let cpu = 0;
        let memory = 0;
        for (const c of measured.containers ?? []) {
          cpu += c.usage?.cpu !== undefined ? parseQuantity(c.usage.cpu) : 0;
          memory += c.usage?.memory !== undefined ? parseQuantity(c.usage.memory) : 0;
        }
        const rank = { rank: pod.rank, cpuCores: cpu, memoryBytes: Math.round(memory) };
        if (ranks) ranks.push(rank);
        else ranks = [rank];
      }
      if (ranks)
        usage.set(
          id,
          ranks.sort((a, b) => a.rank - b.rank),
        );
    }
    return usage;
  };
}
