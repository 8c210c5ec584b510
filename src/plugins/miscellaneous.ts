import { podSpec, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Miscellaneous: small hardening defaults. Pods never restart by themselves, get no service
 * account token or service links, work in `/work` unless the app says otherwise, and run as the
 * storage uid (not root) unless the app needs root; nothing may escalate privileges.
 */
export const miscellaneousPlugin: JobPlugin = {
  name: 'Miscellaneous',
  onCreate(ctx, job, build) {
    const spec = podSpec(build);
    spec.restartPolicy = 'Never';
    spec.automountServiceAccountToken = false;
    spec.enableServiceLinks = false;

    const container = userContainer(build);
    const { changeWorkingDirectory, runAsRoot } = job.application.invocation.container;
    if (changeWorkingDirectory) container.workingDir = '/work';
    container.securityContext = runAsRoot
      ? { runAsUser: 0, allowPrivilegeEscalation: false }
      : {
          runAsNonRoot: true,
          runAsUser: ctx.config.jobUid,
          runAsGroup: ctx.config.jobUid,
          allowPrivilegeEscalation: false,
        };
  },
};
