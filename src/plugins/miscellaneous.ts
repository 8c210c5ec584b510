import { podSpec, restrictedSecurityContext, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Miscellaneous: small hardening defaults. Pods never restart by themselves, get no service
 * account token or service links, work in `/work` unless the app says otherwise, and run as the
 * storage uid (not root) unless the app needs root; nothing may escalate privileges. That is Pod
 * Security "restricted" (seccomp RuntimeDefault, no capabilities) for every app but the root apps
 * allowed (security.allowRootApps), which keep the runtime's default capabilities (sshd needs
 * them) and so meet "baseline"; with kubernetes.userNamespaces their pods get a user namespace of
 * their own (`hostUsers: false`), where that root is an unprivileged id on the node.
 */
export const miscellaneousPlugin: JobPlugin = {
  name: 'Miscellaneous',
  onCreate(ctx, job, build) {
    const spec = podSpec(build);
    spec.restartPolicy = 'Never';
    spec.automountServiceAccountToken = false;
    spec.enableServiceLinks = false;
    spec.securityContext = { ...spec.securityContext, seccompProfile: { type: 'RuntimeDefault' } };

    const container = userContainer(build);
    const { changeWorkingDirectory, runAsRoot } = job.application.invocation.container;
    if (changeWorkingDirectory) container.workingDir = '/work';
    container.securityContext = runAsRoot
      ? { runAsUser: 0, allowPrivilegeEscalation: false }
      : restrictedSecurityContext(ctx.config.jobUid);
    if (runAsRoot && ctx.config.kubernetes.userNamespaces) spec.hostUsers = false;
  },
};
