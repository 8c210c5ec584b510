import { realpathSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { CgroupLayout } from './cgroups.ts';
import { shownHierarchies, topologyViews } from './sys-views.ts';

/**
 * A mount that every container of a runtime binds alike, made once where bubblewrap starts (the
 * supervisors' launcher's mount namespace, see supervisor.pl's prepareMounts): `source` bound at
 * `target` (or, when they are the same mount point, that mount itself), read-only, nosuid, nodev.
 * bubblewrap's read-only bind of it then needs no remount, and what is bound into a prepared
 * mount comes with it: fewer mount calls per container, each of which waits for the kernel's one
 * lock of mount namespaces (issue 18).
 */
export interface PreparedMount {
  source: string;
  target: string;
}

/**
 * What a runtime prepares: the host folders its host view binds whole (`/usr`, the /etc copy),
 * the folder that is containers' /sys with the topology bound in it, and the cgroup hierarchies
 * pods' views come from. In that order: a target inside another is bound after it. Each path as
 * the mount table names it (symlinks resolved), once, as the runtime starts.
 */
export function preparedMounts(
  viewFolders: readonly string[],
  sysRoot: string,
  layout: CgroupLayout | null,
): PreparedMount[] {
  const self = (path: string) => ({ source: realpathSync(path), target: realpathSync(path) });
  const root = realpathSync(sysRoot);
  return [
    ...viewFolders.map(self),
    self(root),
    ...topologyViews().map((path) => ({
      source: realpathSync(path),
      target: join(root, posix.relative('/sys', path)),
    })),
    ...shownHierarchies(layout).map((h) => self(h.root)),
  ];
}

/** As supervisor.pl takes them: `SOURCE,TARGET` in hex, `:`-separated (any bytes pass). */
export const encodePrepared = (mounts: readonly PreparedMount[]): string =>
  mounts
    .map(
      ({ source, target }) => `${Buffer.from(source).toString('hex')},${Buffer.from(target).toString('hex')}`,
    )
    .join(':');
