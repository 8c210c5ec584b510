import { VOLCANO_JOB_NAME_LABEL, VOLCANO_TASK_INDEX_LABEL } from '../volcano/emulation/conventions.ts';
import { JOB_ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, SSH_PORT_ANNOTATION } from '../volcano/labels.ts';
import {
  SSH_KEYS_FILE,
  SSH_KEYS_FOLDER,
  SSH_PORT,
  sshKeysSecretName,
  sshServiceName,
} from '../volcano/names.ts';
import { addVolume, annotateJob, podSpec, restrictedSecurityContext } from './builder.ts';
import { jobPolicy } from './connect-to-job.ts';
import { MULTI_NODE_PATH, MULTI_NODE_VOLUME } from './multi-node.ts';
import type { JobPlugin } from './plugin.ts';

const KEYS_VOLUME = 'ssh-keys';
/** Where the init container reads the Secret. */
const KEYS_SOURCE = '/run/ucompute/ssh-keys';

/**
 * Ssh (UCloud's, for jobs with sshEnabled; after MultiNode, whose /etc/ucloud it writes in): the
 * owner's public keys in `/etc/ucloud/ssh/authorized_keys.ucloud` (0600, the job's user's), a
 * Service `j-<id>-ssh` to port 22 of rank 0 that the world may reach, and at start the endpoint
 * the backend opens for it, said in the job's updates as UCloud says it.
 */
export const sshPlugin: JobPlugin = {
  name: 'Ssh',
  onCreate(ctx, job, build) {
    if (!job.sshEnabled) return;
    const jobName = build.volcanoJob.metadata.name;
    const metadata = (name: string) => ({
      name,
      namespace: build.volcanoJob.metadata.namespace ?? ctx.config.kubernetes.namespace,
      labels: { [JOB_ID_LABEL]: job.id, [MANAGED_BY_LABEL]: MANAGED_BY },
    });
    const keys = ctx.authorizedKeys ?? [];
    build.companions.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: metadata(sshKeysSecretName(job.id)),
      type: 'Opaque',
      stringData: { [SSH_KEYS_FILE]: keys.map((k) => `${k}\n`).join('') },
    });
    // As UCloud's: an init container, as the job's user, copies them into /etc/ucloud (dir 0700,
    // file 0600, the user's own, as sshd insists) from the Secret, which it reads at a path of its own.
    addVolume(build, {
      name: KEYS_VOLUME,
      secret: { secretName: sshKeysSecretName(job.id), defaultMode: 0o444 },
    });
    const spec = podSpec(build);
    spec.initContainers = [
      ...(spec.initContainers ?? []),
      {
        name: 'ssh-keys',
        image: ctx.config.kubernetes.helperImage,
        imagePullPolicy: 'IfNotPresent',
        command: [
          'sh',
          '-c',
          [
            'set -eu',
            `mkdir -p ${SSH_KEYS_FOLDER}`,
            `cp ${KEYS_SOURCE}/${SSH_KEYS_FILE} ${SSH_KEYS_FOLDER}/${SSH_KEYS_FILE}`,
            `chmod 700 ${SSH_KEYS_FOLDER}`,
            `chmod 600 ${SSH_KEYS_FOLDER}/${SSH_KEYS_FILE}`,
          ].join('\n'),
        ],
        resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
        volumeMounts: [
          { name: KEYS_VOLUME, mountPath: KEYS_SOURCE, readOnly: true },
          { name: MULTI_NODE_VOLUME, mountPath: MULTI_NODE_PATH },
        ],
        securityContext: restrictedSecurityContext(ctx.config.jobUid),
      },
    ];
    build.companions.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: metadata(sshServiceName(job.id)),
      spec: {
        type: 'NodePort',
        selector: { [VOLCANO_JOB_NAME_LABEL]: jobName, [VOLCANO_TASK_INDEX_LABEL]: '0' },
        ports: [{ name: 'ssh', port: SSH_PORT, targetPort: SSH_PORT, protocol: 'TCP' }],
      },
    });
    // ssh comes from anywhere, on top of what the job's namespace and its policy allow.
    const namespace = build.volcanoJob.metadata.namespace ?? ctx.config.kubernetes.namespace;
    jobPolicy(build, job.id, namespace).spec.ingress?.push({ ports: [{ protocol: 'TCP', port: SSH_PORT }] });
    annotateJob(build, SSH_PORT_ANNOTATION, String(SSH_PORT));
  },

  async onJobStart(ctx, job) {
    if (job.annotations[SSH_PORT_ANNOTATION] === undefined) return;
    const { host, port } = await ctx.sshEndpoint(job.id);
    await ctx.addStatus(job.id, `SSH: Connected! Available at: ssh ucloud@${host} -p ${port}`);
  },
};
