import type { SecurityPolicy } from '../model/config.ts';
import { type IssueList, joinPath } from '../model/errors.ts';

/**
 * The privileged features of a pod template (SPEC §6: the operator's to allow, never a user's):
 * host paths, host namespaces, privileged containers, added capabilities, privilege escalation and
 * an unmasked /proc. Each one found and not allowed by the policy is an issue naming its field
 * and the setting that would allow it. Root inside a container is not among them: the sandbox maps
 * it to an unprivileged host range.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const refused = (what: string, setting: keyof SecurityPolicy) =>
  `${what} is a privileged feature this configuration does not allow (security.${setting})`;

/** Adds an issue for every privileged feature of the pod spec at `at` that the policy does not allow. */
export function checkPrivileged(pod: Json, at: string, policy: SecurityPolicy, issues: IssueList): void {
  if (!policy.allowHostPaths && Array.isArray(pod.volumes)) {
    pod.volumes.forEach((v: unknown, i) => {
      if (isObject(v) && v.hostPath !== undefined) {
        issues.add(
          joinPath(joinPath(joinPath(at, 'volumes'), i), 'hostPath'),
          refused('a host path', 'allowHostPaths'),
        );
      }
    });
  }
  if (!policy.allowHostNetwork) {
    for (const key of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
      if (pod[key] === true) issues.add(joinPath(at, key), refused(`${key}`, 'allowHostNetwork'));
    }
  }
  if (policy.allowPrivileged) return;
  for (const list of ['initContainers', 'containers'] as const) {
    const containers = pod[list];
    if (!Array.isArray(containers)) continue;
    containers.forEach((c: unknown, i) => {
      const security = isObject(c) ? c.securityContext : undefined;
      if (!isObject(security)) return;
      const where = joinPath(joinPath(joinPath(at, list), i), 'securityContext');
      if (security.privileged === true) {
        issues.add(joinPath(where, 'privileged'), refused('a privileged container', 'allowPrivileged'));
      }
      if (security.allowPrivilegeEscalation === true) {
        issues.add(
          joinPath(where, 'allowPrivilegeEscalation'),
          refused('privilege escalation', 'allowPrivileged'),
        );
      }
      if (security.procMount === 'Unmasked') {
        issues.add(joinPath(where, 'procMount'), refused('an unmasked /proc', 'allowPrivileged'));
      }
      const added = isObject(security.capabilities) ? security.capabilities.add : undefined;
      if (Array.isArray(added) && added.length > 0) {
        issues.add(
          joinPath(where, 'capabilities.add'),
          refused(`adding capabilities (${added.join(', ')})`, 'allowPrivileged'),
        );
      }
    });
  }
}
