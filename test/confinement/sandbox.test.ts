/**
 * Escape routes out of a local pod, tried as an attacker would, as a root container and as a
 * non-root one: each test fails when the protection it names is removed.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, readdir, readFile, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { detectCgroups } from '../../src/backends/local/cgroups.ts';
import {
  container,
  errors,
  fileRuntime,
  missingPrerequisite,
  output,
  outputDir,
  type TestContainer,
  type TestPod,
} from '../support/local-runtime.ts';
import { needs } from '../support/local-tools.ts';
import { until } from '../support/until.ts';

const skip = (await missingPrerequisite()) ?? (await needs('perl')).skip ?? null;

const AS_ROOT = { uid: 0, gid: 0 };
const AS_USER = { uid: 1000, gid: 1000 };

/** Runs `script` in a new container of `pod`; its exit code and output. */
async function run(
  pod: TestPod,
  dir: string,
  name: string,
  script: string,
  extra: Partial<TestContainer> = {},
) {
  const spec = container(dir, name, ['sh', '-c', script], extra);
  const exit = await (await pod.start(spec)).exited;
  return { code: exit.exitCode, out: await output(spec), err: await errors(spec) };
}

describe('confinement of a local pod', { skip: skip ?? false }, () => {
  // One runtime for the file, each test its own pods (fileRuntime).
  const shared = fileRuntime();

  for (const [who, ids] of [
    ['root', AS_ROOT],
    ['non-root', AS_USER],
  ] as const) {
    test(`a ${who} container cannot read root-only host files even when they are mounted in`, async (t) => {
      const { pod } = shared();
      const out = await outputDir(t);
      const p = await pod(`shadow-${who}`);
      const result = await run(p, out, 'main', 'cat /host/shadow; ls /host/root', {
        ...ids,
        mounts: [
          { source: '/etc/shadow', target: '/host/shadow', readOnly: true },
          { source: '/root', target: '/host/root', readOnly: true },
        ],
      });
      assert.notEqual(result.code, 0);
      assert.match(result.err, /shadow: Permission denied/);
      assert.match(result.err, /root.*Permission denied/);
    });

    test(`a ${who} container does not see the host's secrets, home folders, state or data folders`, async (t) => {
      const { pod, stateDir } = shared();
      const out = await outputDir(t);
      const p = await pod(`view-${who}`);
      const paths = [
        '/etc/shadow',
        '/etc/gshadow',
        '/etc/sudoers',
        // World-readable, hidden by the view's deny list: ssh host keys, `*-` backups.
        '/etc/ssh/ssh_host_ed25519_key.pub',
        '/etc/passwd-',
        '/root',
        '/home',
        '/srv',
        '/mnt',
        stateDir,
        out,
      ];
      const script = paths.map((path) => `test -e ${path} && echo "visible ${path}"`).join('; ');
      const result = await run(p, out, 'main', `${script}; test -r /etc/passwd && echo passwd`, ids);
      assert.equal(result.out, 'passwd\n', result.err);
    });

    test(`a ${who} container sees of /sys only the CPUs' topology and its own pod's cgroups, read-only`, async (t) => {
      const { pod } = shared();
      const out = await outputDir(t);
      const layout = await detectCgroups();
      const memory = layout.hierarchies.find((h) => h.controllers.includes('memory'))!;
      const cpuset = layout.hierarchies.find((h) => h.controllers.includes('cpuset'));
      const limit = memory.version === 2 ? 'memory.max' : 'memory.limit_in_bytes';
      const p = await pod(`sys-${who}`, {
        limits: { cpuMillis: 500, memoryBytes: 256 * 2 ** 20, pids: null },
      });
      const script = [
        // What the JVM and libuv read: the pod's limit where the host mounts the hierarchy.
        `cat ${memory.root}/${limit}`,
        'ls /sys/devices/system/cpu | grep -c "^cpu[0-9]"',
        // Its own processes only (the shell and cat), not the host's or another pod's.
        `wc -l < ${memory.root}/cgroup.procs`,
        ...(cpuset
          ? [`wc -l < ${cpuset.root}/cgroup.procs`, `grep -q . ${cpuset.root}/cpuset.cpus && echo cpus`]
          : []),
        `echo 1 > ${memory.root}/${limit} || echo refused`,
        'for f in /sys/kernel /sys/class/net /sys/firmware /sys/fs/cgroup/devices /sys/block; do test -e $f && echo "visible $f"; done',
      ].join('; ');
      const result = await run(p, out, 'main', script, ids);
      const lines = result.out.trim().split('\n');
      assert.equal(lines[0], String(256 * 2 ** 20), result.err);
      assert.ok(Number(lines[1]) >= 1, result.out);
      assert.ok(Number(lines[2]) <= 3, `the memory group lists ${lines[2]} processes`);
      if (cpuset) {
        assert.ok(Number(lines[3]) <= 3, `the cpuset group lists ${lines[3]} processes`);
        assert.equal(lines[4], 'cpus');
      }
      assert.deepEqual(lines.slice(cpuset ? 5 : 3), ['refused']);
      assert.match(result.err, /Read-only file system/);
    });

    test(`a ${who} container's volume below /sys is there, and /sys stays read-only`, async (t) => {
      const { pod } = shared();
      const out = await outputDir(t);
      await mkdir(join(out, 'in'));
      await writeFile(join(out, 'in', 'file'), 'mounted\n');
      await chmod(join(out, 'in', 'file'), 0o644);
      const p = await pod(`sys-volume-${who}`);
      const result = await run(
        p,
        out,
        'main',
        'cat /sys/volume/in/file; ls /sys/devices/system/cpu >/dev/null && echo topology; touch /sys/x || echo refused',
        { ...ids, mounts: [{ source: out, target: '/sys/volume', readOnly: true }] },
      );
      assert.equal(result.out, 'mounted\ntopology\nrefused\n', result.err);
    });

    test(`a ${who} container cannot write /proc/sys`, async (t) => {
      const { pod } = shared();
      const out = await outputDir(t);
      const p = await pod(`sysctl-${who}`);
      const before = await readFile('/proc/sys/kernel/core_pattern', 'utf8');
      const result = await run(p, out, 'main', 'echo "|/bin/false" > /proc/sys/kernel/core_pattern', ids);
      assert.notEqual(result.code, 0);
      assert.equal(await readFile('/proc/sys/kernel/core_pattern', 'utf8'), before);
    });
  }

  test('container ids map to the owner range: files land owned by base+uid, and each owner has its own range', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const work = join(out, 'work');
    await mkdir(work);
    await chmod(work, 0o777);
    const alice = await pod('alice', { owner: 'alice' });
    const bob = await pod('bob', { owner: 'bob' });
    const a = alice.hostIds(1000, 1000);
    const b = bob.hostIds(0, 0);
    assert.ok(a.hostUid >= 1_000_000 && b.hostUid >= 1_000_000, 'no container id is a host user id');
    assert.notEqual(a.hostUid - 1000, b.hostUid, 'owners have different ranges');
    const mounts = [{ source: work, target: '/data', readOnly: false }];
    const asUser = await run(alice, out, 'user', 'id -u; echo hi > /data/result.txt', { ...AS_USER, mounts });
    assert.equal(asUser.out, '1000\n', asUser.err);
    assert.equal((await stat(join(work, 'result.txt'))).uid, a.hostUid);
    const asRoot = await run(bob, out, 'root', 'id -u; echo hi > /data/root.txt', { ...AS_ROOT, mounts });
    assert.equal(asRoot.out, '0\n', asRoot.err);
    assert.equal((await stat(join(work, 'root.txt'))).uid, b.hostUid);
  });

  test('the seccomp profile refuses namespaces, keyrings and odd personalities; no_new_privs is set; /sys/kernel is absent', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('seccomp');
    // x86-64 numbers: add_key 248, keyctl 250 (KEYCTL_GET_KEYRING_ID of the session keyring),
    // personality 135 (ADDR_NO_RANDOMIZE); perl prints the errno's text, or "ok".
    const probe = (name: string, call: string) =>
      `perl -e '${call} == -1 ? print "${name}=$!\\n" : print "${name}=ok\\n"'`;
    const script = [
      'unshare -U true 2>/dev/null && echo userns=ok || echo userns=refused',
      probe('add_key', 'my ($t, $d, $p) = ("user", "k", "v"); syscall(248, $t, $d, $p, 1, -3)'),
      probe('keyctl', 'syscall(250, 0, -3, 0)'),
      probe('personality', 'syscall(135, 0x0040000)'),
      'grep NoNewPrivs /proc/self/status',
      'test -e /sys/kernel && echo sys=visible || echo sys=absent',
    ].join('; ');
    const result = await run(p, out, 'main', script, AS_ROOT);
    assert.deepEqual(result.out.trim().split('\n'), [
      'userns=refused',
      'add_key=Operation not permitted',
      'keyctl=Operation not permitted',
      'personality=Operation not permitted',
      'NoNewPrivs:\t1',
      'sys=absent',
    ]);
  });

  test('a container gets only its standard descriptors: not the user namespace, seccomp or mount sources', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('descriptors');
    for (const [who, ids] of [
      ['root', AS_ROOT],
      ['non-root', AS_USER],
    ] as const) {
      // The shell's descriptors, listed by another process (a glob would list its own folder's).
      const result = await run(p, out, `fds-${who}`, 'ls /proc/$$/fd', {
        ...ids,
        mounts: [{ source: out, target: '/data', readOnly: true }],
      });
      assert.equal(result.out, '0\n1\n2\n', `${who}: ${result.err}`);
    }
  });

  test('a symlink a job planted is never bound: not as the source, not on the way to it', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const work = join(out, 'job-folder');
    await mkdir(work);
    await symlink('/', join(work, 'hostroot'));
    await symlink('/etc/passwd', join(work, 'input.txt'));
    await symlink('/etc', join(work, 'etc'));
    const p = await pod('symlinks');
    for (const source of [join(work, 'hostroot'), join(work, 'input.txt'), join(work, 'etc', 'passwd')]) {
      const spec = container(out, 'main', ['true'], {
        mounts: [{ source, target: '/work/in', readOnly: true }],
      });
      await assert.rejects(p.start(spec), /could not start container main: .* is a symlink/);
    }
  });

  test('the container environment appears in no process arguments, and its files are the container user’s', async (t) => {
    const { pod, stateDir } = shared();
    const out = await outputDir(t);
    const p = await pod('secrets');
    // A name the supervisor's shell cannot carry (Kubernetes allows '-' and '.') takes another way.
    // (sh drops such names itself: its own initial environment shows it.)
    const script = `cat /etc/secret/key; echo " $API_KEY $(tr '\\0' '\\n' < /proc/$$/environ | sed -n 's/^api-token.v2=//p')"; sleep 30`;
    const spec = container(out, 'main', ['sh', '-c', script], {
      ...AS_USER,
      env: { PATH: '/usr/bin:/bin', API_KEY: 'secret-xyz', 'api-token.v2': 'secret-abc' },
      files: [{ path: '/etc/secret/key', content: 'secret-file', mode: 0o600 }],
    });
    await p.start(spec);
    await until(async () => (await output(spec).catch(() => '')).endsWith('\n'), {
      describe: 'the container printed',
    });
    assert.equal(await output(spec), 'secret-file secret-xyz secret-abc\n', await errors(spec));
    const leaks: string[] = [];
    for (const pid of (await readdir('/proc')).filter((e) => /^\d+$/.test(e))) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (/secret-(xyz|abc)/.test(cmdline)) leaks.push(`${pid}: ${cmdline.replaceAll('\0', ' ')}`);
    }
    assert.deepEqual(leaks, [], 'a process shows the secret in its arguments');
    // The secret file (and the variables bubblewrap reads from a file) live on a tmpfs, unreadable
    // to a host user who is neither root nor the container's; the container's record on disk does
    // not hold the environment.
    const secrets = join(stateDir, 'secrets', p.name, 'main');
    const files = (await readdir(secrets)).sort();
    assert.equal(files.length, 2, files.join(', '));
    assert.equal((await statfs(secrets)).type, 0x01021994, 'the files are on a tmpfs');
    assert.equal(await readFile(join(secrets, files[0]!), 'utf8'), 'secret-file');
    assert.match(await readFile(join(secrets, files[1]!), 'utf8'), /secret-abc/);
    for (const file of files) {
      const asNobody = () =>
        execFileSync(
          'setpriv',
          ['--reuid=65534', '--regid=65534', '--clear-groups', 'cat', join(secrets, file)],
          {
            stdio: 'pipe',
          },
        );
      assert.throws(asNobody, /Permission denied/, `${file} is readable by nobody`);
    }
    const record = await readFile(
      join(stateDir, 'pods', p.name, 'containers', 'main', 'container.json'),
      'utf8',
    );
    assert.doesNotMatch(record, /secret-(xyz|abc)/);
  });
});
