import { VOLCANO_JOB_NAME_LABEL } from '../volcano/emulation/conventions.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL } from '../volcano/labels.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Minikube (development clusters only, off unless configured): a LoadBalancer Service on port 80
 * for the job's web or VNC port, so that a laptop cluster can reach it without the session proxy.
 */
export const minikubePlugin: JobPlugin = {
  name: 'Minikube',
  onCreate(ctx, job, build) {
    if (!ctx.config.kubernetes.minikube) return;
    const port = job.application.invocation.web?.port ?? job.application.invocation.vnc?.port;
    if (port === undefined) return;
    const jobName = build.volcanoJob.metadata.name;
    build.companions.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: `${jobName}-mk`,
        namespace: build.volcanoJob.metadata.namespace ?? ctx.config.kubernetes.namespace,
        labels: { [JOB_ID_LABEL]: job.id, [MANAGED_BY_LABEL]: MANAGED_BY },
      },
      spec: {
        type: 'LoadBalancer',
        selector: { [VOLCANO_JOB_NAME_LABEL]: jobName },
        ports: [{ name: 'session', port: 80, targetPort: port, protocol: 'TCP' }],
      },
    });
  },
};
