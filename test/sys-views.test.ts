import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { test } from 'node:test';
import { detectCgroups } from '../src/backends/local/cgroups.ts';
import { prepareSysRoot, sysViews } from '../src/backends/local/sys-views.ts';

/** A v1 host as this project's CI machines are: one hierarchy per controller, cpu and cpuacct apart. */
const V1 = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
  '34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');

const V2 = '30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate';

const cgroupTargets = (views: { target: string }[]) =>
  views.map((v) => v.target).filter((target) => target.startsWith('/sys/fs/cgroup'));

test('v1: a container is shown the four groups the JVM needs (memory, cpu, cpuacct, cpuset), not pids', async () => {
  const layout = await detectCgroups(V1);
  const dirs = layout.hierarchies.map((h) => join(h.root, 'ucompute-x', 'pod'));
  const views = sysViews(layout, dirs);
  assert.deepEqual(cgroupTargets(views).sort(), [
    '/sys/fs/cgroup/cpu',
    '/sys/fs/cgroup/cpuacct',
    '/sys/fs/cgroup/cpuset',
    '/sys/fs/cgroup/memory',
  ]);
  for (const { source, target } of views.filter((v) => v.target.startsWith('/sys/fs/cgroup'))) {
    assert.equal(source, join(target, 'ucompute-x', 'pod'));
  }
});

test('v2: the one hierarchy is shown', async () => {
  const layout = await detectCgroups(V2);
  const views = sysViews(layout, [join('/sys/fs/cgroup', 'ucompute-x', 'pod')]);
  assert.deepEqual(cgroupTargets(views), ['/sys/fs/cgroup']);
});

test("the folder a container's /sys is: the views' mount points, 0755 whatever the umask; made again, nothing removed", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-sys-root-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'sys-view');
  // A mount point of a running container's view, from an earlier start: removing it would unmount the view.
  await mkdir(join(root, 'fs', 'cgroup', 'pids'), { recursive: true });
  const layout = await detectCgroups(V1);
  const umask = process.umask(0o077);
  try {
    await prepareSysRoot(root, layout);
  } finally {
    process.umask(umask);
  }
  const views = sysViews(
    layout,
    layout.hierarchies.map((h) => join(h.root, 'ucompute-x', 'pod')),
  );
  const expected = new Set<string>(['.', 'fs/cgroup/pids']);
  for (const { target } of views) {
    for (let folder = target; folder !== '/sys'; folder = posix.dirname(folder)) {
      expected.add(posix.relative('/sys', folder));
    }
  }
  const found = ['.', ...(await readdir(root, { recursive: true }))].sort();
  assert.deepEqual(found, [...expected].sort());
  for (const folder of found) assert.equal((await stat(join(root, folder))).mode & 0o7777, 0o755, folder);
});
