import { type Catalog, compareVersions } from '../catalog/catalog.ts';
import type { ResolvedApplication } from '../model/application.ts';
import type { UcloudApplicationStore } from '../store/ucloud-applications.ts';

const key = (name: string, version: string) => `${name}@${version}`;

/** The store's order: by name, then version, as strings. */
function byNameAndVersion(a: ResolvedApplication, b: ResolvedApplication): number {
  const [x, y] = [a.application.metadata, b.application.metadata];
  if (x.name !== y.name) return x.name < y.name ? -1 : 1;
  return x.version < y.version ? -1 : x.version > y.version ? 1 : 0;
}

export type CoreCatalog = Catalog & {
  /** Keeps an application Core resolved for a job (in the store before it answers). */
  remember(resolved: ResolvedApplication): Promise<void>;
};

/**
 * The catalogue of provider mode: the applications UCloud Core resolved for the jobs it sent, kept
 * in the store (a job's application is needed again after a restart: to build it, to open its
 * sessions, to show it). UCloud never changes an application published under a name and version,
 * so they are all read once, at start, and kept in memory too.
 */
export async function coreCatalog(applications: UcloudApplicationStore): Promise<CoreCatalog> {
  const known = new Map<string, ResolvedApplication>();
  for (const resolved of (await applications.all()) as ResolvedApplication[]) {
    const { name, version } = resolved.application.metadata;
    known.set(key(name, version), resolved);
  }
  return {
    async remember(resolved) {
      const { name, version } = resolved.application.metadata;
      const k = key(name, version);
      if (known.has(k)) return;
      await applications.put(name, version, resolved);
      known.set(k, resolved);
    },
    find: (name, version) => known.get(key(name, version)),
    versions: (name) =>
      [...known.values()]
        .map((r) => r.application.metadata)
        .filter((m) => m.name === name)
        .map((m) => m.version)
        .sort(compareVersions),
    list: () => [...known.values()].sort(byNameAndVersion),
  };
}
