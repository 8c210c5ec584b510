import type { Container, PodSpec, ResourceList } from '../volcano/api/types.ts';
import {
  JOB_ID_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  OWNER_LABEL,
  PIDS_LIMIT_ANNOTATION,
} from '../volcano/labels.ts';
import { JOB_TASK_NAME, USER_CONTAINER_NAME } from '../volcano/names.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/** Home of jobs that do not run as root; the ssh plugin puts the replicas' keys there. */
export const NON_ROOT_HOME = '/home/ucompute';

/**
 * Task: the core of the Volcano Job. One task `job` with `replicas` copies of the container
 * `user-job`, gang-scheduled (`minAvailable = replicas`), with the product's resources as both
 * requests and limits. Volcano's `env` and `svc` plugins give each replica its index and the
 * host list; multi-node jobs also get the `ssh` plugin's shared keys.
 */
export const taskPlugin: JobPlugin = {
  name: 'Task',
  onCreate(ctx, job, build) {
    const { product } = job;
    const resources: ResourceList = { cpu: `${product.cpu * 1000}m`, memory: `${product.memoryInGigs}Gi` };
    if ((product.gpu ?? 0) > 0) resources['nvidia.com/gpu'] = String(product.gpu);

    const container: Container = {
      name: USER_CONTAINER_NAME,
      image: job.tool.image,
      imagePullPolicy: 'IfNotPresent',
      resources: { requests: { ...resources }, limits: { ...resources } },
    };
    const spec: PodSpec = { containers: [container] };
    const nodeSelector = {
      ...ctx.config.kubernetes.nodeSelectors[product.category],
      ...product.nodeSelector,
    };
    if (Object.keys(nodeSelector).length > 0) spec.nodeSelector = nodeSelector;
    const tolerations = ctx.config.kubernetes.tolerations[product.category];
    if (tolerations?.length) spec.tolerations = tolerations.map((t) => ({ ...t }));
    if (ctx.config.kubernetes.imagePullSecrets.length > 0) {
      spec.imagePullSecrets = ctx.config.kubernetes.imagePullSecrets.map((name) => ({ name }));
    }

    const plugins: Record<string, string[]> = { env: [], svc: [] };
    if (job.replicas > 1 && job.application.invocation.allowMultiNode) {
      plugins.ssh = job.application.invocation.container.runAsRoot
        ? []
        : [`--ssh-key-file-path=${NON_ROOT_HOME}/.ssh`];
      if (!job.application.invocation.container.runAsRoot)
        container.env = [{ name: 'HOME', value: NON_ROOT_HOME }];
    }

    const labels = build.volcanoJob.metadata.labels ?? {};
    build.volcanoJob.spec = {
      schedulerName: 'volcano',
      minAvailable: job.replicas,
      queue: ctx.config.kubernetes.queue,
      plugins,
      // A replica that fails or is evicted ends the whole gang: the others cannot go on without it.
      // No policy restarts the job, so no maxRetry is sent: Volcano's (3) would never count, and
      // a 0 is Go's "unset" to Volcano's mutating webhook, which stored 3 in its place anyway.
      policies: [
        { event: 'PodFailed', action: 'TerminateJob' },
        { event: 'PodEvicted', action: 'AbortJob' },
      ],
      tasks: [
        {
          name: JOB_TASK_NAME,
          replicas: job.replicas,
          minAvailable: job.replicas,
          template: {
            metadata: {
              labels: {
                [JOB_ID_LABEL]: job.id,
                ...(labels[OWNER_LABEL] !== undefined ? { [OWNER_LABEL]: labels[OWNER_LABEL] } : {}),
                [MANAGED_BY_LABEL]: MANAGED_BY,
              },
            },
            spec,
          },
        },
      ],
    };
    if (product.pids !== undefined) annotateJob(build, PIDS_LIMIT_ANNOTATION, String(product.pids));
  },
};
