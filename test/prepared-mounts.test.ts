import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PERL, programPath } from '../src/backends/local/programs.ts';
import { compiledSeccomp } from '../src/backends/local/seccomp.ts';
import { supervisorArguments } from '../src/backends/local/supervisor.ts';
import {
  container,
  errors,
  fileRuntime,
  missingPrerequisite,
  output,
  outputDir,
  type TestRuntime,
} from './support/local-runtime.ts';
import { until } from './support/until.ts';

const skip = await missingPrerequisite();

/** Mount point → per-mount options of the topmost mount there, from a mountinfo text. */
function mountOptions(mountinfo: string): Map<string, string[]> {
  const options = new Map<string, string[]>();
  for (const line of mountinfo.split('\n').filter(Boolean)) {
    const fields = line.split(' ');
    options.set(fields[4]!, fields[5]!.split(','));
  }
  return options;
}

/**
 * The host's mountinfo as the supervisors' launcher compares it (supervisor-launcher.pl's
 * hostMountsKept): without /run/netns, what is below it and the namespace files.
 */
async function hostMountsKept(): Promise<string> {
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((line) => {
      const [mount = '', source = ''] = line.split(' - ');
      const point = mount.split(' ')[4] ?? '';
      return !source.startsWith('nsfs ') && point !== '/run/netns' && !point.startsWith('/run/netns/');
    })
    .join('\n');
}

/** The pid of bubblewrap's first process for a container of the pod: it stays where bubblewrap started. */
async function sandboxPid(rt: TestRuntime, pod: string, name: string): Promise<string> {
  const pidFile = join(rt.stateDir, 'pods', pod, 'containers', name, 'pid');
  return until(
    async () => {
      const supervisor = (await readFile(pidFile, 'utf8').catch(() => '')).trim();
      if (!supervisor) return null;
      const children = await readFile(`/proc/${supervisor}/task/${supervisor}/children`, 'utf8');
      const pid = children.trim().split(' ')[0];
      if (!pid) return null;
      return (await readlink(`/proc/${pid}/exe`).catch(() => '')).endsWith('/bwrap') ? pid : null;
    },
    { describe: "the supervisor's child runs bubblewrap" },
  );
}

const READ_ONLY = ['ro', 'nosuid', 'nodev'];
const missingFlags = (options: string[] | undefined) =>
  options ? READ_ONLY.filter((flag) => !options.includes(flag)) : ['(no mount)'];

describe('prepared mounts (issue 18)', { skip: skip ?? false }, () => {
  const shared = fileRuntime();
  const loopback = fileRuntime({ network: 'loopback' });

  test('what every container binds alike is read-only, nosuid and nodev where bubblewrap starts; the host keeps its own', async (t) => {
    const rt = shared();
    const out = await outputDir(t);
    const p = await rt.pod('prepared');
    const running = await p.start(container(out, 'main', ['sleep', '1000']));
    const base = mountOptions(
      await readFile(`/proc/${await sandboxPid(rt, p.name, 'main')}/mountinfo`, 'utf8'),
    );
    const host = mountOptions(await readFile('/proc/self/mountinfo', 'utf8'));
    const sysRoot = join(rt.stateDir, 'sys-view');
    const etcCopies = [...base.keys()].filter((point) => /host-view[^/]*\/etc-[0-9a-f]+$/.test(point));
    assert.equal(
      etcCopies.length,
      1,
      `one /etc copy is a mount where bubblewrap starts:\n${[...base.keys()]}`,
    );
    const cgroups = [...host.keys()].filter((point) =>
      /^\/sys\/fs\/cgroup\/(memory|cpu|cpuacct|cpuset)$/.test(point),
    );
    const prepared = ['/usr', etcCopies[0]!, sysRoot, join(sysRoot, 'devices/system/cpu'), ...cgroups];
    for (const point of prepared) {
      assert.deepEqual(
        missingFlags(base.get(point)),
        [],
        `${point} is read-only, nosuid, nodev where bubblewrap starts`,
      );
    }
    assert.equal(host.has(sysRoot), false, "the host has no mount at the containers' /sys folder");
    for (const point of cgroups) {
      assert.equal(host.get(point)!.includes('ro'), false, `the host's ${point} stays writable`);
    }
    await p.destroy(0);
    await running.exited;
  });

  test("a network namespace added on the host keeps the launcher's namespace; another mount there makes it again, with that mount in it", async (t) => {
    const rt = shared();
    const out = await outputDir(t);
    const p = await rt.pod('kept');
    /** Where the container's bubblewrap starts: the launcher's namespace, and what is mounted there. */
    const startsIn = async (name: string) => {
      const running = await p.start(container(out, name, ['sleep', '1000']));
      const pid = await sandboxPid(rt, p.name, name);
      const namespace = await readlink(`/proc/${pid}/ns/mnt`);
      return { namespace, mounts: mountOptions(await readFile(`/proc/${pid}/mountinfo`, 'utf8')), running };
    };
    // Other tests of the suite mount and unmount on the host meanwhile, which rightly makes the
    // namespace again: an attempt counts only when the host's other mounts were the same
    // before the first container and after the second (a few attempts, each its own containers).
    const started: Awaited<ReturnType<typeof startsIn>>[] = [];
    let first: Awaited<ReturnType<typeof startsIn>> | undefined;
    for (let attempt = 0; attempt < 5 && first === undefined; attempt++) {
      const before = await hostMountsKept();
      const candidate = await startsIn(`first-${attempt}`);
      // As `ip netns add` does for every pod's namespace: a mount below /run/netns.
      const netns = `ucpm${process.pid.toString(36)}-${attempt}`;
      execFileSync('ip', ['netns', 'add', netns]);
      t.after(() => void execFileSync('ip', ['netns', 'del', netns]));
      const second = await startsIn(`second-${attempt}`);
      started.push(candidate, second);
      if (before !== (await hostMountsKept())) continue;
      assert.equal(
        second.namespace,
        candidate.namespace,
        'a namespace added under /run/netns changes nothing there',
      );
      first = candidate;
    }
    assert.ok(first, "the host's other mounts changed during each of 5 attempts");
    const folder = await mkdtemp(join(tmpdir(), 'ucompute-host-mount-'));
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', folder]);
    t.after(async () => {
      execFileSync('umount', [folder]);
      await rm(folder, { recursive: true });
    });
    const third = await startsIn('third');
    assert.notEqual(third.namespace, first.namespace, 'another mount on the host makes the namespace again');
    assert.equal(
      third.mounts.has(folder),
      true,
      `the host's new mount is there:\n${[...third.mounts.keys()]}`,
    );
    assert.equal(first.mounts.has(folder), false);
    await p.destroy(0);
    await Promise.all([...started, third].map((c) => c.running.exited));
  });

  test('a writable placement inside a prepared mount stays writable (that container starts where none are)', async (t) => {
    const rt = shared();
    const out = await outputDir(t);
    // A folder of the containers' /sys folder, a prepared mount, stands for an operator's hostPath under /usr.
    const inside = join(rt.stateDir, 'sys-view', 'writable');
    await mkdir(inside);
    await chmod(inside, 0o777);
    t.after(() => rm(inside, { recursive: true, force: true }));
    const p = await rt.pod('writable');
    const spec = container(
      out,
      'main',
      ['sh', '-c', 'echo x > /data/x && ls /sys/devices/system/cpu | grep -c "^cpu[0-9]"'],
      {
        mounts: [{ source: inside, target: '/data', readOnly: false }],
      },
    );
    assert.equal((await (await p.start(spec)).exited).exitCode, 0, await errors(spec));
    assert.equal(await readFile(join(inside, 'x'), 'utf8'), 'x\n');
    assert.ok(Number((await output(spec)).trim()) > 0, 'its /sys still shows the CPUs');
    await p.destroy(0);
  });

  test('a container sees the same mounts, with the same options, as one started without them', async (t) => {
    const out = await outputDir(t);
    const seen: Map<string, string[]>[] = [];
    for (const [rt, name] of [
      [shared(), 'bridge'],
      [loopback(), 'loopback'],
    ] as const) {
      const p = await rt.pod(`same-${name}`);
      const spec = container(out, name, [
        'sh',
        '-c',
        'cat /proc/self/mountinfo; touch /sys/devices/system/cpu/x /usr/x /etc/x 2>/dev/null && echo written; ls /sys/devices/system/cpu | grep -c "^cpu[0-9]"',
      ]);
      assert.equal((await (await p.start(spec)).exited).exitCode, 0, await errors(spec));
      const lines = (await output(spec)).trim().split('\n');
      assert.ok(Number(lines.at(-1)) > 0, `the CPUs are listed in /sys:\n${lines.join('\n')}`);
      assert.equal(lines.includes('written'), false, 'nothing of them can be written');
      seen.push(mountOptions(lines.slice(0, -1).join('\n')));
      await p.destroy(0);
    }
    const [bridge, alone] = seen as [Map<string, string[]>, Map<string, string[]>];
    for (const point of ['/usr', '/etc', '/sys', '/sys/devices/system/cpu']) {
      assert.deepEqual(
        missingFlags(bridge.get(point)),
        [],
        `${point} is read-only, nosuid, nodev in the container`,
      );
    }
    // The same mount points in the same order (one started in the host's mount namespace, where
    // nothing is prepared), each with the same options.
    assert.deepEqual([...bridge.entries()], [...alone.entries()]);
  });
});

describe('prepared mounts without the launcher', { skip: skip ?? false }, () => {
  /** supervisor.pl run as a program (no launcher, so no namespace made for it) in a network namespace of the test's own. */
  async function superviseInNamespace(
    t: { after(fn: () => Promise<void>): void },
    prepared: { source: string; target: string }[],
  ) {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-prepared-'));
    const name = `ucpm${process.pid.toString(36)}`;
    execFileSync('ip', ['netns', 'add', name]);
    t.after(async () => {
      execFileSync('ip', ['netns', 'delete', name]);
      await rm(dir, { recursive: true, force: true });
    });
    const { syscalls } = await compiledSeccomp(dir);
    const args = supervisorArguments({
      stateDir: dir,
      cgroupProcs: [],
      stdout: join(dir, 'out'),
      stderr: join(dir, 'err'),
      netns: `/run/netns/${name}`,
      prepared: prepared.map(({ source, target }) => ({
        source: join(dir, source),
        target: join(dir, target),
      })),
      hostIds: null,
      syscalls,
      sandboxStatus: null,
      logs: { maxSizeBytes: 1 << 20, maxFiles: 2 },
      argv: ['cat', '/proc/self/mountinfo'],
    });
    for (const folder of ['view', 'view/inside', 'topology']) await mkdir(join(dir, folder));
    await new Promise((resolve) => execFile(PERL, [programPath('supervisor.pl'), ...args], resolve));
    const read = (file: string) => readFile(join(dir, file), 'utf8');
    return { dir, exit: (await read('exit')).trim(), out: await read('out'), err: await read('err') };
  }

  test("a supervisor's child makes them itself, read-only, nosuid, nodev, in its own mount namespace", async (t) => {
    const { dir, exit, out, err } = await superviseInNamespace(t, [
      { source: 'view', target: 'view' },
      { source: 'topology', target: 'view/inside' },
    ]);
    assert.equal(exit, '0', err);
    const seen = mountOptions(out);
    for (const point of ['view', 'view/inside']) {
      assert.deepEqual(
        missingFlags(seen.get(join(dir, point))),
        [],
        `${point} is prepared where the command runs:\n${out}`,
      );
    }
    const host = mountOptions(await readFile('/proc/self/mountinfo', 'utf8'));
    assert.equal(host.has(join(dir, 'view')), false, 'the host has none of them');
  });

  test('one that cannot be made stops the container, saying which', async (t) => {
    const { exit, out, err } = await superviseInNamespace(t, [{ source: 'missing', target: 'view' }]);
    assert.equal(exit, '126');
    assert.equal(out, '', 'the command did not run');
    assert.match(
      err,
      /could not prepare the read-only mounts: binding .*\/missing at .*\/view: No such file or directory/,
    );
  });
});
