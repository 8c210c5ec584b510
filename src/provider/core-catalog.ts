import { type Catalog, compareVersions } from '../catalog/catalog.ts';
import type { ResolvedApplication } from '../model/application.ts';
import type { UcloudApplicationStore } from '../store/ucloud-applications.ts';

const key = (name: string, version: string) => `${name}@${version}`;

/**
 * The catalogue of provider mode: the applications UCloud Core resolved for the jobs it sent, kept
 * in the store (a job's application is needed again after a restart: to build it, to open its
 * sessions, to show it). UCloud never changes an application published under a name and version,
 * so what was read once is kept in memory too.
 */
export function coreCatalog(applications: UcloudApplicationStore): Catalog & {
  /** Keeps an application Core resolved for a job. */
  remember(resolved: ResolvedApplication): void;
} {
  const known = new Map<string, ResolvedApplication | undefined>();
  let listed: ResolvedApplication[] | undefined;
  return {
    remember(resolved) {
      const { name, version } = resolved.application.metadata;
      const k = key(name, version);
      if (known.get(k) !== undefined) return;
      applications.put(name, version, resolved);
      known.set(k, resolved);
      listed = undefined;
    },
    find(name, version) {
      const k = key(name, version);
      if (!known.has(k)) known.set(k, applications.get(name, version) as ResolvedApplication | undefined);
      return known.get(k);
    },
    versions: (name) => applications.versions(name).sort(compareVersions),
    list() {
      listed ??= applications.all() as ResolvedApplication[];
      return listed;
    },
  };
}
