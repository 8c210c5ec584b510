import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { PERL, PROGRAMS, PYTHON, programPath } from '../src/backends/local/programs.ts';
import { compiledSeccomp } from '../src/backends/local/seccomp.ts';
import { enterContainerArgv } from '../src/backends/local/shell-entry.ts';
import {
  CGROUP_JOIN_FAILED,
  SUPERVISOR_NAME,
  supervisorArguments,
} from '../src/backends/local/supervisor.ts';
import { needs } from './support/local-tools.ts';
import { until } from './support/until.ts';

/** The local runtime's programs in Perl, Python and sh: linted, and each run on its own. */

const exec = promisify(execFile);
const DIR = join(import.meta.dirname, '../src/backends/local/programs');

/** Runs a command; its exit code, stdout and stderr, whatever the code. */
function runProgram(file: string, args: string[], input?: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(file, args, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function tempDir(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-programs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('every program the runtime runs is a file in programs/, and every file there is one of them', async () => {
  assert.deepEqual((await readdir(DIR)).sort(), [...PROGRAMS].sort());
});

const linters = await needs('perl', 'pyflakes3', 'shellcheck');

test(
  'the programs pass their linters in strict mode: perl -cw with strict, pyflakes, shellcheck with set -eu',
  linters,
  async () => {
    for (const name of PROGRAMS) {
      const path = programPath(name);
      const text = await readFile(path, 'utf8');
      if (name.endsWith('.pl')) {
        assert.match(text, /^use strict;$/m, `${name} is strict`);
        assert.match(text, /^#!\/usr\/bin\/perl -w\n/, `${name} warns`);
        const { stderr } = await exec(PERL, ['-cw', path]);
        assert.equal(stderr, `${path} syntax OK\n`, name);
      } else if (name.endsWith('.py')) {
        await exec(PYTHON, ['-c', 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])', path]);
        assert.equal((await exec('pyflakes3', [path])).stdout, '', name);
      } else {
        assert.match(text, /^set -eu$/m, `${name} stops at the first error and on unset variables`);
        assert.equal((await exec('shellcheck', [path])).stdout, '', name);
      }
    }
  },
);

/** A supervisor run as a program with supervisorArguments, without cgroups, namespace or ids. */
async function supervise(
  dir: string,
  argv: string[],
  o: {
    cgroupProcs?: string[];
    logs?: { maxSizeBytes: number; maxFiles: number };
    sandboxStatus?: string;
  } = {},
) {
  const args = supervisorArguments({
    stateDir: dir,
    cgroupProcs: o.cgroupProcs ?? [],
    stdout: join(dir, 'out'),
    stderr: join(dir, 'err'),
    netns: null,
    prepared: [],
    hostIds: null,
    syscalls: null,
    sandboxStatus: o.sandboxStatus ?? null,
    logs: o.logs ?? { maxSizeBytes: 1024, maxFiles: 3 },
    argv,
  });
  // Its own process group, as the supervisors' launcher starts it.
  const child = spawn(PERL, [programPath('supervisor.pl'), ...args], { stdio: 'ignore', detached: true });
  const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, ended };
}

const read = (path: string) => readFile(path, 'utf8');

test("the supervisor records its pid, the command's output and, after it, how the command ended", async (t) => {
  const dir = await tempDir(t);
  const { child, ended } = await supervise(dir, ['/bin/sh', '-c', 'echo out; echo err >&2; exit 3']);
  await ended;
  assert.equal(await read(join(dir, 'pid')), `${child.pid}\n`);
  assert.equal(await read(join(dir, 'out')), 'out\n');
  assert.equal(await read(join(dir, 'err')), 'err\n', 'the command said it; the supervisor said nothing');
  assert.equal(await read(join(dir, 'exit')), '3\n');
});

test('the supervisor hands bubblewrap its status file, opened for writing, as --json-status-fd', async (t) => {
  const dir = await tempDir(t);
  // A stand-in for bubblewrap: writes its exit code where --json-status-fd says, then runs the rest.
  const sandbox = join(dir, 'sandbox');
  await writeFile(
    sandbox,
    '#!/bin/sh\n[ "$1" = --json-status-fd ] || exit 9\necho \'{ "exit-code": 4 }\' >&"$2"\nshift 2\nexec "$@"\n',
    {
      mode: 0o755,
    },
  );
  const { ended } = await supervise(dir, [sandbox, '/bin/sh', '-c', 'exit 4'], {
    sandboxStatus: join(dir, 'sandbox-status'),
  });
  await ended;
  assert.equal(await read(join(dir, 'sandbox-status')), '{ "exit-code": 4 }\n');
  assert.equal(await read(join(dir, 'exit')), '4\n');
});

test('the supervisor rotates output at its size, keeping the newest files; an earlier run’s file is rotated first', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'out'), 'earlier\n');
  const logs = { maxSizeBytes: 10, maxFiles: 3 };
  const { ended } = await supervise(dir, ['/bin/sh', '-c', 'printf 0123456789abcdefghijKLMNO'], { logs });
  await ended;
  assert.equal(await read(join(dir, 'out')), 'KLMNO');
  assert.equal(await read(join(dir, 'out.1')), 'abcdefghij');
  assert.equal(await read(join(dir, 'out.2')), '0123456789');
  await assert.rejects(stat(join(dir, 'out.3')), { code: 'ENOENT' }, 'three files kept, the oldest dropped');
});

test('SIGTERM to the supervisor reaches the command, whose end it records (143)', async (t) => {
  const dir = await tempDir(t);
  const { child, ended } = await supervise(dir, ['/bin/sh', '-c', 'echo started; exec sleep 30']);
  await until(async () => (await read(join(dir, 'out')).catch(() => '')) === 'started\n', {
    describe: 'the command runs',
  });
  assert.match(
    await read(`/proc/${child.pid}/cmdline`),
    new RegExp(SUPERVISOR_NAME),
    'it is known by its name',
  );
  // The supervisor's process group: itself and the command, as a destroy without cgroups signals it.
  process.kill(-child.pid!, 'SIGTERM');
  await ended;
  assert.equal(await read(join(dir, 'exit')), '143\n');
});

test('a command that cannot be found is 127, said on its stderr; a cgroup it cannot join is 125 and nothing runs', async (t) => {
  const dir = await tempDir(t);
  const missing = await supervise(dir, ['/nonexistent/program']);
  await missing.ended;
  assert.equal(await read(join(dir, 'exit')), '127\n');
  assert.match(await read(join(dir, 'err')), /^\/nonexistent\/program: No such file or directory\n$/);

  const other = await tempDir(t);
  const ran = join(other, 'ran');
  const blocked = await supervise(other, ['/bin/sh', '-c', `touch ${ran}`], {
    cgroupProcs: [join(other, 'no-such-cgroup', 'cgroup.procs')],
  });
  await blocked.ended;
  assert.equal(await read(join(other, 'exit')), `${CGROUP_JOIN_FAILED}\n`);
  await assert.rejects(stat(ran), { code: 'ENOENT' });
});

test("a shell's cgroup join writes its own pid, which the command keeps; a cgroup it cannot join is 125", async (t) => {
  const dir = await tempDir(t);
  const procs = [join(dir, 'a.procs'), join(dir, 'b.procs')];
  const joined = await runProgram('/bin/sh', [
    programPath('join-cgroups.sh'),
    procs.join(':'),
    '/bin/sh',
    '-c',
    'echo $$',
  ]);
  assert.equal(joined.code, 0, joined.stderr);
  for (const file of procs) assert.equal(await read(file), joined.stdout, 'the pid that became the command');
  const refused = await runProgram('/bin/sh', [
    programPath('join-cgroups.sh'),
    join(dir, 'none', 'x'),
    'true',
  ]);
  assert.equal(refused.code, CGROUP_JOIN_FAILED);
  const none = await runProgram('/bin/sh', [programPath('join-cgroups.sh'), '', '/bin/echo', 'no cgroups']);
  assert.equal(none.stdout, 'no cgroups\n');
});

const seccompTools = await needs('python3');

test(
  'the seccomp compiler writes a BPF program and resolves system calls by name with libseccomp',
  seccompTools,
  async (t) => {
    const dir = await tempDir(t);
    const compiled = await compiledSeccomp(dir);
    const size = (await stat(compiled.program)).size;
    assert.ok(size > 0 && size % 8 === 0, `a BPF program is whole 8-byte instructions (${size} bytes)`);
    // The numbers are the kernel's: setns(-1, 0) is refused for its descriptor, setgroups(-1, 0) for its size.
    const errnos = await exec(PERL, [
      '-e',
      'syscall($ARGV[0], -1, 0); print $!+0, " "; syscall($ARGV[1], -1, 0); print $!+0',
      String(compiled.syscalls.setns),
      String(compiled.syscalls.setgroups),
    ]);
    assert.equal(errnos.stdout, '9 22', 'EBADF from setns, EINVAL from setgroups');
    assert.deepEqual(await compiledSeccomp(dir), compiled, 'compiled once, found again');
  },
);

const netTools = await needs('ip');

test(
  'the namespace set-up configures each new namespace by netlink and resets a reused one',
  netTools,
  async (t) => {
    const name = `uclc${process.pid.toString(36)}`;
    await exec('ip', ['netns', 'add', name]);
    t.after(() => exec('ip', ['netns', 'delete', name]).then(() => undefined));
    // The pod's end of a veth, as network.ts makes it; its addresses exist inside the namespace only.
    await exec('ip', ['link', 'add', `${name}h`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name]);
    await exec('ip', ['link', 'set', `${name}h`, 'addrgenmode', 'none', 'up']);
    const seccomp = await compiledSeccomp(await tempDir(t));
    const configure = (kind: string, address: string) =>
      runProgram(PERL, [
        programPath('configure-netns.pl'),
        String(seccomp.syscalls.setns),
        '10.250.0.1',
        name,
        kind,
        address,
      ]);
    const ipIn = async (...args: string[]) => (await exec('ip', ['-n', name, ...args])).stdout;
    const globalAddresses = async () =>
      (await ipIn('-o', 'addr', 'show', 'dev', 'eth0', 'scope', 'global')).match(/inet6? \S+/g);

    assert.deepEqual(await configure('new', '10.250.0.7/24'), { code: 0, stdout: '', stderr: '' });
    assert.match(await ipIn('-o', 'link', 'show', 'lo'), /<LOOPBACK,UP,LOWER_UP>/);
    assert.match(await ipIn('-o', 'link', 'show', 'eth0'), /<[^>]*\bUP\b[^>]*>/);
    assert.deepEqual(await globalAddresses(), ['inet 10.250.0.7/24']);
    assert.match(await ipIn('route', 'show', 'default'), /^default via 10\.250\.0\.1 dev eth0/);
    const ports = await exec('ip', [
      'netns',
      'exec',
      name,
      'cat',
      '/proc/sys/net/ipv4/ip_unprivileged_port_start',
    ]);
    assert.equal(ports.stdout, '0\n');

    // What a previous pod's traffic leaves, and what only CAP_NET_ADMIN could have added (its TCP
    // metrics: test/local-network-reuse.test.ts).
    await exec('ip', [
      '-n',
      name,
      'neigh',
      'add',
      '10.250.0.9',
      'lladdr',
      '02:00:00:00:00:01',
      'dev',
      'eth0',
      'nud',
      'stale',
    ]);
    await exec('ip', [
      '-n',
      name,
      'neigh',
      'add',
      'fe80::5',
      'lladdr',
      '02:00:00:00:00:02',
      'dev',
      'eth0',
      'nud',
      'stale',
    ]);
    await exec('ip', ['-n', name, 'addr', 'add', '2001:db8::5/64', 'dev', 'eth0']);
    assert.deepEqual(await configure('reused', '10.250.0.8/24'), { code: 0, stdout: '', stderr: '' });
    assert.deepEqual(await globalAddresses(), ['inet 10.250.0.8/24']);
    assert.equal(await ipIn('neigh', 'show'), '');
    assert.match(await ipIn('route', 'show', 'default'), /^default via 10\.250\.0\.1 dev eth0/);

    // A reused namespace something is left in is named, and left as it is.
    const holder = spawn('ip', ['netns', 'exec', name, 'sleep', '60'], { stdio: 'ignore' });
    t.after(() => {
      holder.kill('SIGKILL');
    });
    await until(async () => (await exec('ip', ['netns', 'pids', name])).stdout.trim() !== '', {
      describe: 'a process in the namespace',
    });
    assert.deepEqual(await configure('reused', '10.250.0.9/24'), {
      code: 0,
      stdout: `${name}\n`,
      stderr: '',
    });
    assert.deepEqual(await globalAddresses(), ['inet 10.250.0.8/24']);

    const failed = await configure('new', '10.250.0.8/24');
    assert.notEqual(failed.code, 0);
    assert.match(failed.stderr, new RegExp(`^netns ${name}: address 10\\.250\\.0\\.8/24: File exists$`, 'm'));
    const missing = await runProgram(PERL, [
      programPath('configure-netns.pl'),
      String(seccomp.syscalls.setns),
      '10.250.0.1',
      'uclc-none',
      'new',
      '10.250.0.8/24',
    ]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /^netns uclc-none: No such file or directory$/m);
  },
);

const entryTools = await needs('unshare', 'python3');

test(
  "a shell's entry joins the target's namespaces and drops every capability it is not given",
  entryTools,
  async (t) => {
    const seccomp = await compiledSeccomp(await tempDir(t));
    // A process in namespaces of its own (uts among them, with its own host name) stands for a container;
    // --kill-child: the forked sleep dies with unshare (it outlived the test before).
    const holder = spawn(
      'unshare',
      [
        '--uts',
        '--ipc',
        '--pid',
        '--fork',
        '--kill-child',
        '/bin/sh',
        '-c',
        'hostname uclc-inner; exec sleep 60',
      ],
      {
        stdio: 'ignore',
      },
    );
    t.after(() => {
      holder.kill('SIGKILL');
    });
    const target = await until(
      async () => {
        const children = await read(`/proc/${holder.pid}/task/${holder.pid}/children`).catch(() => '');
        const pid = Number(children.trim().split(' ')[0]);
        return pid > 0 && (await read(`/proc/${pid}/comm`).catch(() => '')) === 'sleep\n' ? pid : 0;
      },
      { describe: 'the namespaced process runs' },
    );
    const [file, ...rest] = enterContainerArgv(
      target,
      { uid: 0, gid: 0 },
      seccomp.program,
      [],
      ['/bin/sh', '-c', 'hostname; grep ^CapEff /proc/self/status'],
    );
    const entered = await runProgram(file!, rest);
    assert.equal(entered.code, 0, entered.stderr);
    assert.equal(entered.stdout, 'uclc-inner\nCapEff:\t0000000000000000\n');
  },
);

test(
  'the idmapped mount shows a folder read-only with its ids through a user namespace',
  await needs('unshare', 'umount'),
  async (t) => {
    const source = await tempDir(t);
    await mkdir(join(source, 'private'), { mode: 0o700 });
    // Its own folder, unmounted before it is removed.
    const target = await mkdtemp(join(tmpdir(), 'ucompute-idmapped-'));
    t.after(async () => {
      await exec('umount', [target]).catch(() => undefined);
      await rm(target, { recursive: true, force: true });
    });
    // A user namespace mapping ids 0..65535 to 3,000,000.., held by a process of its own.
    const holder = spawn('unshare', ['--user', 'sleep', '60'], { stdio: 'ignore' });
    t.after(() => {
      holder.kill('SIGKILL');
    });
    const ours = await readlink('/proc/self/ns/user');
    await until(async () => (await readlink(`/proc/${holder.pid}/ns/user`).catch(() => ours)) !== ours, {
      describe: 'the holder is in its namespace',
    });
    for (const map of ['uid_map', 'gid_map'])
      await writeFile(`/proc/${holder.pid}/${map}`, '0 3000000 65536\n');
    const mounted = await runProgram(PERL, [
      programPath('idmapped-mount.pl'),
      `/proc/${holder.pid}/ns/user`,
      source,
      target,
    ]);
    assert.equal(mounted.code, 0, mounted.stderr);
    const seen = await stat(join(target, 'private'));
    assert.deepEqual([seen.uid, seen.gid, seen.mode & 0o777], [3000000, 3000000, 0o700]);
    await assert.rejects(writeFile(join(target, 'new'), ''), { code: 'EROFS' });
  },
);
