/**
 * The fake API server's metrics.k8s.io: what metrics-server would answer for pods, set by the
 * test (`PodMetrics` per pod: CPU and memory of its containers), listed per namespace, with the
 * group's discovery document.
 */
import type { Call } from './api-server.ts';

const GROUP_VERSION = 'metrics.k8s.io/v1beta1';

export interface ContainerUsage {
  /** A quantity: `250m`, `1500000n`. */
  cpu: string;
  /** A quantity: `64Mi`. */
  memory: string;
}

export function fakeMetricsApi() {
  const pods = new Map<string, Map<string, ContainerUsage[]>>();
  return {
    /** What metrics-server reports for a pod's containers from now on. */
    set(namespace: string, pod: string, containers: ContainerUsage[]): void {
      let inNamespace = pods.get(namespace);
      if (!inNamespace) {
        inNamespace = new Map();
        pods.set(namespace, inNamespace);
      }
      inNamespace.set(pod, containers);
    },

    /** The answer to a request of this group (recorded in `calls`), or undefined for any other path. */
    answer(path: string, method: string, calls: Call[]): { status: number; body: unknown } | undefined {
      if (path === `/apis/${GROUP_VERSION}`) {
        return {
          status: 200,
          body: {
            kind: 'APIResourceList',
            apiVersion: 'v1',
            groupVersion: GROUP_VERSION,
            resources: [
              {
                name: 'pods',
                singularName: '',
                namespaced: true,
                kind: 'PodMetrics',
                verbs: ['get', 'list'],
              },
            ],
          },
        };
      }
      const m = new RegExp(`^/apis/${GROUP_VERSION}/namespaces/([^/]+)/pods$`).exec(path);
      if (!m || method !== 'GET') return undefined;
      const namespace = decodeURIComponent(m[1]!);
      calls.push({ verb: 'list', group: 'metrics.k8s.io', resource: 'pods', namespace });
      const now = new Date().toISOString();
      return {
        status: 200,
        body: {
          kind: 'PodMetricsList',
          apiVersion: GROUP_VERSION,
          metadata: {},
          items: [...(pods.get(namespace) ?? new Map<string, ContainerUsage[]>())].map(
            ([name, containers]) => ({
              metadata: { name, namespace },
              timestamp: now,
              window: '15s',
              containers: containers.map((usage, i) => ({ name: i === 0 ? 'user-job' : `c${i}`, usage })),
            }),
          ),
        },
      };
    },
  };
}
