import assert from 'node:assert/strict';
import { test } from 'node:test';
import { detectCgroups } from '../src/backends/local/cgroups.ts';

/** A v1 host (this project's CI machines): one hierarchy per controller, a v2 one without controllers. */
const V1 = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
  '34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');

test('v1: the limits first, then CPU accounting and the CPU set, which the JVM needs to see', async () => {
  const { hierarchies, missing } = await detectCgroups(V1);
  assert.deepEqual(missing, []);
  assert.deepEqual(
    hierarchies.map((h) => [h.version, h.root, h.controllers]),
    [
      [1, '/sys/fs/cgroup/memory', ['memory']],
      [1, '/sys/fs/cgroup/cpu,cpuacct', ['cpu', 'cpuacct']],
      [1, '/sys/fs/cgroup/pids', ['pids']],
      [1, '/sys/fs/cgroup/cpuset', ['cpuset']],
    ],
  );
});

test('without a v1 cpuset hierarchy there is no cpuset group', async () => {
  const withoutCpuset = V1.split('\n')
    .filter((line) => !line.includes('cpuset'))
    .join('\n');
  const { hierarchies } = await detectCgroups(withoutCpuset);
  assert.ok(hierarchies.every((h) => !h.controllers.includes('cpuset')));
});
