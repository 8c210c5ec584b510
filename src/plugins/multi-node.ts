import { svcTaskKey } from '../volcano/emulation/conventions.ts';
import { JOB_TASK_NAME } from '../volcano/names.ts';
import { addVolume, mount, podSpec, restrictedSecurityContext, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

export const MULTI_NODE_PATH = '/etc/ucloud';
/** The emptyDir at /etc/ucloud, which init containers write into. */
export const MULTI_NODE_VOLUME = 'ucloud-multinode';

/**
 * MultiNode: every replica finds the others in `/etc/ucloud`: `rank.txt`, `number_of_nodes.txt`,
 * `nodes.txt`, `node-<rank>.txt`, `job_id.txt` and `cores.txt`. An init container writes them from
 * Volcano's `VC_TASK_INDEX` and `/etc/volcano/job.host`, which exist only once the pod does.
 */
export const multiNodePlugin: JobPlugin = {
  name: 'MultiNode',
  onCreate(ctx, job, build) {
    const hostFile = `/etc/volcano/${svcTaskKey(JOB_TASK_NAME).file}.host`;
    const script = [
      'set -eu',
      `cd ${MULTI_NODE_PATH}`,
      'printf "%s\\n" "$VC_TASK_INDEX" > rank.txt',
      `printf "%s\\n" "${job.replicas}" > number_of_nodes.txt`,
      `printf "%s\\n" "${job.id}" > job_id.txt`,
      `printf "%s\\n" "${job.product.cpu}" > cores.txt`,
      // awk also takes the last host, which the svc plugin writes without a trailing newline.
      `awk '{ print; print > ("node-" (NR - 1) ".txt") }' ${hostFile} > nodes.txt`,
    ].join('\n');

    addVolume(build, { name: MULTI_NODE_VOLUME, emptyDir: {} });
    mount(userContainer(build), { name: MULTI_NODE_VOLUME, mountPath: MULTI_NODE_PATH });
    const spec = podSpec(build);
    spec.initContainers = [
      ...(spec.initContainers ?? []),
      {
        name: 'ucloud-compat',
        image: ctx.config.kubernetes.helperImage,
        imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c', script],
        resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
        volumeMounts: [{ name: MULTI_NODE_VOLUME, mountPath: MULTI_NODE_PATH }],
        securityContext: restrictedSecurityContext(ctx.config.jobUid),
      },
    ];
  },
};
