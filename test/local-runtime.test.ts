import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { createRuntime } from '../src/backends/local/create-runtime.ts';
import type { PodRecord } from '../src/backends/local/pod/context.ts';
import {
  allocateArgv,
  container,
  errors,
  fileRuntime,
  missingPrerequisite,
  output,
  outputDir,
  serverArgv,
  testRuntime,
} from './support/local-runtime.ts';
import { until } from './support/until.ts';

const skip = await missingPrerequisite();

const podRecord = async (stateDir: string, name: string): Promise<PodRecord> =>
  JSON.parse(await readFile(join(stateDir, 'pods', name, 'pod.json'), 'utf8'));

describe('local runtime', { skip: skip ?? false }, () => {
  // One runtime for the tests that need only pods of their own; those that look at a runtime's
  // state, bridge, close or restart make their own.
  const shared = fileRuntime();

  test('a container runs with its env, cwd, user, hostname, mounts, files, private /tmp and /dev/shm', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const readOnly = join(out, 'ro');
    await writeFile(join(out, 'host-tmp-marker'), '');
    execFileSync('mkdir', ['-p', readOnly]);
    await writeFile(join(readOnly, 'given'), 'from the host\n');
    const p = await pod('basics', { hostname: 'basics-host', shmBytes: 2 * 1024 * 1024 });
    const data = await p.volumeDir('data');
    const spec = container(
      out,
      'main',
      [
        'sh',
        '-c',
        [
          'echo "pid=$$"',
          'echo "host=$(hostname)"',
          'echo "ids=$(id -u):$(id -g)"',
          'echo "cwd=$(pwd)"',
          'echo "greeting=$GREETING"',
          'echo "home=[$HOME]"',
          'echo "procs=$(ls /proc | grep -c "^[0-9]")"',
          'echo "shm=$(stat -f -c "%b %S" /dev/shm)"',
          'echo "given=$(cat /ro/given)"',
          'touch /ro/refused 2>/dev/null && echo "ro-write=yes" || echo "ro-write=no"',
          'touch /usr/refused 2>/dev/null && echo "root-write=yes" || echo "root-write=no"',
          'echo written > /data/out',
          'echo "secret=$(stat -c "%a %u %g" /etc/volcano/secret) $(cat /etc/volcano/secret)"',
          'touch /tmp/private && echo "tmp-write=yes"',
          `test -e ${join(out, 'host-tmp-marker').replace(tmpdir(), '/tmp')} && echo "host-tmp=visible" || echo "host-tmp=hidden"`,
          'echo "resolv=$(test -s /etc/resolv.conf && echo present)"',
        ].join('\n'),
      ],
      {
        env: { PATH: '/usr/bin:/bin', GREETING: 'hello world' },
        workingDir: '/data',
        uid: 1000,
        gid: 1000,
        mounts: [
          { source: data, target: '/data', readOnly: false },
          { source: readOnly, target: '/ro', readOnly: true },
        ],
        files: [{ path: '/etc/volcano/secret', content: 'key', mode: 0o600 }],
      },
    );
    const running = await p.start(spec);
    const exit = await running.exited;
    assert.deepEqual(
      exit,
      { exitCode: 0, signal: null, oomKilled: false },
      (await output(spec)) + (await errors(spec)),
    );
    const lines = Object.fromEntries(
      (await output(spec))
        .trim()
        .split('\n')
        .map((line) => line.split(/=(.*)/s).slice(0, 2)),
    );
    assert.equal(await errors(spec), '');
    assert.equal(lines.pid, '2', 'the command is the second process of its own pid namespace');
    assert.equal(lines.host, 'basics-host');
    assert.equal(lines.ids, '1000:1000');
    assert.equal(lines.cwd, '/data');
    assert.equal(lines.greeting, 'hello world');
    assert.equal(lines.home, '[]', 'the host environment does not leak in');
    assert.ok(Number(lines.procs) <= 5, `the container sees only its own processes, saw ${lines.procs}`);
    const [blocks, blockSize] = lines.shm.split(' ').map(Number);
    assert.equal(blocks * blockSize, 2 * 1024 * 1024);
    assert.equal(lines.given, 'from the host');
    assert.equal(lines['ro-write'], 'no');
    assert.equal(lines['root-write'], 'no');
    assert.equal(await readFile(join(data, 'out'), 'utf8'), 'written\n');
    assert.equal((await stat(data)).mode & 0o777, 0o777);
    assert.equal(lines.secret, '600 1000 1000 key');
    assert.equal(lines['tmp-write'], 'yes');
    assert.equal(lines['host-tmp'], 'hidden');
    assert.equal(lines.resolv, 'present');
    assert.equal(existsSync('/tmp/private'), false);
  });

  test("Perl's variables reach the container, never the root supervisor that starts it", async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const marker = join(out, 'perl-ran-as-root');
    // PERL5OPT can run code: `-M5;…` becomes `use 5;…` in any Perl that starts with it.
    const perl5opt = `-M5;open(my$f,q{>},q{${marker}});`;
    const spec = container(out, 'perl-env', ['sh', '-c', 'echo "$PERL5OPT"'], {
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', PERL5OPT: perl5opt },
    });
    const started = await pod('perl-env').then((p) => p.start(spec));
    assert.equal((await started.exited).exitCode, 0);
    assert.equal((await output(spec)).trim(), perl5opt);
    assert.equal(existsSync(marker), false, 'the supervisor ran code from PERL5OPT');
  });

  test('exit codes and signals are reported', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('exits');
    const failed = await p.start(container(out, 'failed', ['sh', '-c', 'exit 7']));
    assert.deepEqual(await failed.exited, { exitCode: 7, signal: null, oomKilled: false });
    const killed = await p.start(container(out, 'killed', ['sh', '-c', 'kill -TERM $$']));
    assert.deepEqual(await killed.exited, { exitCode: 143, signal: 'SIGTERM', oomKilled: false });
    const missing = await p.start(container(out, 'missing', ['/no/such/program']));
    assert.notEqual((await missing.exited).exitCode, 0);
    assert.match(await errors(container(out, 'missing', [])), /no\/such\/program/);
    assert.deepEqual(
      p.containers().map((c) => c.name),
      ['failed', 'killed', 'missing'],
    );
  });

  test('a process allocating past the memory limit is OOM-killed and reported so', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('oom', { limits: { cpuMillis: null, memoryBytes: 160 * 1024 * 1024, pids: null } });
    const hog = await p.start(container(out, 'hog', allocateArgv(512 * 1024 * 1024)));
    assert.deepEqual(await hog.exited, { exitCode: 137, signal: 'SIGKILL', oomKilled: true });
    const fits = await p.start(container(out, 'fits', allocateArgv(4 * 1024 * 1024)));
    assert.deepEqual(await fits.exited, { exitCode: 0, signal: null, oomKilled: false });
  });

  test('cpu, memory and pids limits are written, and the pids limit holds', async (t) => {
    const { pod, stateDir } = await testRuntime(t);
    const out = await outputDir(t);
    const p = await pod('limits', { limits: { cpuMillis: 500, memoryBytes: 64 * 1024 * 1024, pids: 20 } });
    const { cgroups } = await podRecord(stateDir, p.name);
    const read = async (file: string) => {
      for (const dir of cgroups)
        if (existsSync(join(dir, file))) return (await readFile(join(dir, file), 'utf8')).trim();
      return null;
    };
    const cpu =
      (await read('cpu.max')) ?? `${await read('cpu.cfs_quota_us')} ${await read('cpu.cfs_period_us')}`;
    assert.equal(cpu, '50000 100000');
    assert.equal(
      (await read('memory.max')) ?? (await read('memory.limit_in_bytes')),
      String(64 * 1024 * 1024),
    );
    assert.equal(await read('pids.max'), '20');
    const spec = container(out, 'forks', [
      'sh',
      '-c',
      'i=0; while [ $i -lt 40 ]; do sleep 10 & i=$((i + 1)); done; echo "all 40 started"',
    ]);
    const forks = await p.start(spec);
    await forks.exited;
    assert.doesNotMatch(await output(spec), /all 40 started/);
    assert.match(await errors(spec), /fork/i, 'the shell could not fork past the limit');
  });

  test("a pod's usage counts the CPU time and the memory its processes use, from its cgroups", async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('busy');
    const idle = await p.usage();
    assert.notEqual(idle.cpuSeconds, null, 'CPU time is counted here (cpu.stat or cpuacct)');
    assert.notEqual(idle.memoryBytes, null);
    // A busy loop holding 32 MiB: its CPU time grows by about a second per second.
    await p.start(
      container(out, 'burn', [
        'sh',
        '-c',
        'x=$(head -c 33554432 /dev/zero | tr "\\0" a); while :; do :; done',
      ]),
    );
    let busy = idle;
    await until(
      async () => {
        busy = await p.usage();
        return (
          (busy.cpuSeconds ?? 0) - (idle.cpuSeconds ?? 0) > 0.5 && (busy.memoryBytes ?? 0) > 32 * 2 ** 20
        );
      },
      { describe: 'half a CPU second and 32 MiB used', timeout: 60_000, every: 100 },
    );
    assert.ok(
      (busy.memoryBytes ?? 0) < 512 * 2 ** 20,
      `${busy.memoryBytes} bytes: the page cache is not counted`,
    );
  });

  test('destroy ends every process and leaves nothing behind', async (t) => {
    const { pod, stateDir, bridge } = await testRuntime(t);
    const out = await outputDir(t);
    const p = await pod('destroyed');
    await p.allowPeers(['10.1.2.3']);
    const record = await podRecord(stateDir, p.name);
    // A child that ignores SIGTERM needs the SIGKILL after the grace period.
    const main = await p.start(
      container(out, 'main', ['sh', '-c', "sleep 1000 & trap '' TERM; sleep 1000; wait"]),
    );
    await until(
      async () => {
        const procs = await readFile(join(record.cgroups[0]!, 'cgroup.procs'), 'utf8');
        const commands = await Promise.all(
          procs
            .trim()
            .split('\n')
            .map((pid) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')),
        );
        return commands.filter((c) => c === 'sleep\u00001000\u0000').length === 2;
      },
      { describe: 'the processes run, the trap set' },
    );
    const started = Date.now();
    await Promise.all([p.destroy(300), p.destroy(300)]);
    assert.ok(Date.now() - started >= 250, 'destroy waited for the grace period');
    await p.destroy(300);
    const exit = await main.exited;
    assert.equal(exit.signal, 'SIGKILL');
    for (const dir of record.cgroups) assert.equal(existsSync(dir), false, `cgroup ${dir} is removed`);
    // Its network namespace is kept for a later pod, reset (local-network-reuse tests the reset).
    const netns = record.network.netns!;
    // The reset comes after destroy, in the background: it keeps the namespace for a later pod,
    // emptied, or deletes it when something is left in it (local-network-reuse tests which).
    await until(
      () => {
        try {
          const addresses = execFileSync('ip', ['-n', netns, 'addr', 'show'], { encoding: 'utf8' });
          const pids = execFileSync('ip', ['netns', 'pids', netns], { encoding: 'utf8' });
          return !addresses.includes(`${record.network.ip}/`) && pids === '';
        } catch {
          return !existsSync(join('/run/netns', netns));
        }
      },
      { describe: "the namespace is deleted, or kept without the pod's address and with no process in it" },
    );
    const set = execFileSync('nft', ['list', 'set', 'bridge', bridge, 'pairs'], {
      encoding: 'utf8',
    });
    assert.ok(!set.includes(record.network.ip), 'no nftables element names the pod');
    assert.equal(existsSync(join(stateDir, 'pods', p.name)), false, 'the pod folder is removed');
    const running = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    assert.ok(!running.includes(join(stateDir, 'pods', p.name)), 'no supervisor is left');
  });

  test("bubblewrap starts where the host's namespace files (/run/netns, others) are gone and /dev is nosuid; the host keeps its own", async (t) => {
    const devOptions = (mountinfo: string) =>
      mountinfo
        .split('\n')
        .filter((line) => line.split(' ')[4] === '/dev')
        .at(-1)
        ?.split(' ')[5]
        ?.split(',');
    const hostDev = devOptions(await readFile('/proc/self/mountinfo', 'utf8'));
    const { pod, stateDir } = await testRuntime(t);
    const out = await outputDir(t);
    const p = await pod('unmounted');
    const record = await podRecord(stateDir, p.name);
    // A namespace file mounted elsewhere than /run/netns, as each owner's user namespace is.
    const nsDir = await mkdtemp(join(tmpdir(), 'ucompute-namespace-file-'));
    const nsFile = join(nsDir, 'uts');
    await writeFile(nsFile, '');
    execFileSync('/usr/bin/mount', ['--bind', '/proc/self/ns/uts', nsFile]);
    t.after(async () => {
      execFileSync('/usr/bin/umount', ['--lazy', nsFile]);
      await rm(nsDir, { recursive: true, force: true });
    });
    const main = await p.start(container(out, 'main', ['sleep', '1000']));
    const pidFile = join(stateDir, 'pods', p.name, 'containers', 'main', 'pid');
    // The supervisor's child execs bubblewrap, whose first process stays in the child's mount namespace.
    // Known by its program, not its arguments: before the exec the child's command line is the
    // supervisor's, which names bwrap too (the mounts read then are the host's).
    const sandbox = await until(
      async () => {
        const supervisor = (await readFile(pidFile, 'utf8').catch(() => '')).trim();
        if (!supervisor) return null;
        const children = await readFile(`/proc/${supervisor}/task/${supervisor}/children`, 'utf8');
        const pid = children.trim().split(' ')[0];
        if (!pid) return null;
        const program = await readlink(`/proc/${pid}/exe`).catch(() => '');
        return program.endsWith('/bwrap') ? pid : null;
      },
      { describe: "the supervisor's child runs bubblewrap" },
    );
    const mounts = await readFile(`/proc/${sandbox}/mountinfo`, 'utf8');
    assert.ok(!mounts.includes(' /run/netns'), `no /run/netns mount where bubblewrap starts:\n${mounts}`);
    const host = await readFile('/proc/self/mountinfo', 'utf8');
    assert.ok(
      host.includes(`/run/netns/${record.network.netns}`),
      "the host still has the pod's namespace mount",
    );
    const nsfs = (mountinfo: string) => mountinfo.split('\n').filter((line) => line.includes(' - nsfs '));
    assert.ok(
      nsfs(host).some((line) => line.includes(nsFile)),
      'the host keeps its namespace file mounts',
    );
    assert.deepEqual(nsfs(mounts), [], 'no namespace file is mounted where bubblewrap starts');
    // bubblewrap's binds of /dev/null, zero, … then have nosuid already and need no remount each.
    assert.ok(devOptions(mounts)?.includes('nosuid'), `/dev is nosuid where bubblewrap starts:\n${mounts}`);
    assert.deepEqual(devOptions(host), hostDev, "the host's /dev keeps its options");
    const devices = container(out, 'devices', [
      'sh',
      '-c',
      'head -c 3 /dev/zero | wc -c; echo x > /dev/null',
    ]);
    assert.equal((await (await p.start(devices)).exited).exitCode, 0, await errors(devices));
    assert.equal((await output(devices)).trim(), '3', 'the devices work in the container');
    await p.destroy(0);
    await main.exited;
  });

  test('a folder mounted on the host after containers started is what the next container binds', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('late-mount');
    // The supervisors' launcher runs, and has the mount namespace its supervisors' children join.
    const before = container(out, 'before', ['true']);
    assert.equal((await (await p.start(before)).exited).exitCode, 0, await errors(before));
    const late = join(out, 'late');
    await mkdir(late);
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', 'size=1m', 'ucompute-test-late', late]);
    try {
      await writeFile(join(late, 'given'), 'on the late mount\n');
      const spec = container(out, 'after', ['cat', '/late/given'], {
        mounts: [{ source: late, target: '/late', readOnly: true }],
      });
      const exit = await (await p.start(spec)).exited;
      assert.equal(exit.exitCode, 0, await errors(spec));
      assert.equal(await output(spec), 'on the late mount\n');
    } finally {
      execFileSync('/usr/bin/umount', ['--lazy', late]);
    }
    await p.destroy(0);
  });

  test('a restarted runtime recovers running pods and learns their exit codes; dead leftovers are cleaned', async (t) => {
    const first = await testRuntime(t);
    const out = await outputDir(t);
    const long = await first.pod('recovered');
    await long.start(container(out, 'main', ['sh', '-c', 'sleep 1; exit 5']));
    const server = await first.pod('serving');
    await server.start(container(out, 'server', serverArgv(8080, 'still here')));
    const empty = await first.pod('empty');
    const emptyRecord = await podRecord(first.stateDir, empty.name);
    // The first runtime goes away without destroying anything, as when ucompute restarts.
    await first.runtime.close();

    const second = await createRuntime(first.options);
    t.after(() => second.close());
    const pods = await second.recover();
    assert.deepEqual(pods.map((p) => p.name).sort(), [long.name, server.name].sort());
    const recovered = pods.find((p) => p.name === long.name)!;
    assert.equal(recovered.ip, long.ip);
    const [main] = recovered.containers();
    assert.equal(main?.name, 'main');
    assert.deepEqual(await main!.exited, { exitCode: 5, signal: null, oomKilled: false });
    const serving = pods.find((p) => p.name === server.name)!;
    const socket = await serving.connect(8080);
    assert.equal(await new Response(socket as unknown as ReadableStream).text(), 'still here');
    assert.equal(existsSync(join(first.stateDir, 'pods', empty.name)), false, 'the empty pod is cleaned');
    for (const dir of emptyRecord.cgroups) assert.equal(existsSync(dir), false);
    await Promise.all(pods.map((p) => p.destroy(0)));
  });

  test("pods' state files are on the host's tmpfs, linked from the state folder, kept while a pod is left", async (t) => {
    const { runtime, stateDir, pod } = await testRuntime(t);
    const out = await outputDir(t);
    const p = await pod('tmpfs');
    const main = await p.start(container(out, 'main', ['true']));
    await main.exited;
    const folder = await readlink(join(stateDir, 'pods'));
    assert.match(folder, /^\/dev\/shm\/ucompute-pods-[0-9a-f]{16}$/);
    assert.equal(execFileSync('stat', ['-f', '-c', '%T', folder], { encoding: 'utf8' }).trim(), 'tmpfs');
    assert.equal((await stat(folder)).mode & 0o777, 0o711);
    for (const file of ['pod.json', 'containers/main/pid', 'containers/main/exit']) {
      assert.ok(existsSync(join(folder, p.name, file)), `${file} is there`);
    }
    const volume = await p.volumeDir('data');
    assert.equal(volume, join(stateDir, 'volumes', p.name, 'data'), 'volumes stay on disk');
    const record = await podRecord(stateDir, p.name);
    const { netns } = record.network;
    // The instance's folder of pod cgroups in each hierarchy (ucompute-<bridge>).
    const cgroupParents = record.cgroups.map((dir) => dirname(dir));
    assert.ok(cgroupParents.length > 0 && cgroupParents.every((dir) => existsSync(dir)));
    // Closed with a pod left (as when ucompute restarts): kept for the next; gone with the last pod.
    await runtime.close();
    assert.ok(existsSync(join(folder, p.name, 'pod.json')));
    assert.deepEqual(
      cgroupParents.filter((dir) => !existsSync(dir)),
      [],
      'kept while its pod is left',
    );
    await p.destroy(0);
    assert.equal(existsSync(`/run/netns/${netns}`), false, "the pod's namespace is deleted after close too");
    assert.equal(existsSync(folder), false, "the instance's folder is removed with its last pod");
    // Left in every hierarchy by each full suite until the last pod's destroy removed it.
    assert.deepEqual(
      cgroupParents.filter((dir) => existsSync(dir)),
      [],
      "the instance's cgroup folders are removed with its last pod",
    );
    assert.equal(existsSync(join(stateDir, 'volumes', p.name)), false, "the pod's volumes are removed");
    assert.equal(
      existsSync(join(stateDir, 'secrets', p.name)),
      false,
      "the pod's Secrets' folder is removed",
    );
  });

  test('a runtime whose state folder is on a tmpfs runs a pod and closes (no secrets mount of its own to remove)', async (t) => {
    const stateDir = await mkdtemp('/dev/shm/ucompute-runtime-');
    t.after(() => rm(stateDir, { recursive: true, force: true }));
    const runtime = await createRuntime({ stateDir, network: 'loopback' });
    let closed = false;
    t.after(async () => {
      if (!closed) await runtime.close();
    });
    const out = await outputDir(t);
    const p = await runtime.createPod({
      name: `on-tmpfs-${process.pid}`,
      jobId: `job-on-tmpfs-${process.pid}`,
      owner: 'default',
      hostname: 'on-tmpfs',
      limits: { cpuMillis: null, memoryBytes: null, pids: null },
      shmBytes: null,
    });
    t.after(() => p.destroy(0));
    const main = await p.start({ ...container(out, 'main', ['true']), ...p.hostIds(0, 0) });
    assert.equal((await main.exited).exitCode, 0);
    await p.destroy(0);
    await runtime.close();
    closed = true;
  });

  test("a runtime opened again after close removed its cgroups' folder gives the new folder its CPUs: a pod runs", async (t) => {
    const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-runtime-'));
    t.after(() => rm(stateDir, { recursive: true, force: true }));
    const out = await outputDir(t);
    // The second runtime's parent folder has the first's name (from the state folder), made again.
    for (const round of [1, 2]) {
      const runtime = await createRuntime({ stateDir, network: 'loopback' });
      let closed = false;
      t.after(async () => {
        if (!closed) await runtime.close();
      });
      const p = await runtime.createPod({
        name: `again-${round}-${process.pid}`,
        jobId: `job-again-${round}-${process.pid}`,
        owner: 'default',
        hostname: 'again',
        limits: { cpuMillis: null, memoryBytes: null, pids: null },
        shmBytes: null,
      });
      t.after(() => p.destroy(0));
      const main = await p.start({ ...container(out, 'main', ['true']), ...p.hostIds(0, 0) });
      assert.equal(
        (await main.exited).exitCode,
        0,
        `round ${round}: the container joined its cgroups and ran`,
      );
      await p.destroy(0);
      await runtime.close();
      closed = true;
    }
  });

  test('a shell runs inside the container, as its user, follows resizes, and tells its exit code', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('shell', { hostname: 'shell-host' });
    await p.start(container(out, 'main', ['sleep', '1000'], { uid: 1000, gid: 1000, workingDir: '/tmp' }));
    const shell = await p.shell({ cols: 80, rows: 24 });
    let seen = '';
    shell.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
    });
    shell.write('echo "[$(stty size)|$(id -u)|$(hostname)|$(pwd)]"\n');
    await until(() => seen.includes('[24 80|1000|shell-host|/tmp]'), { describe: 'the shell answers' });
    shell.resize({ cols: 100, rows: 30 });
    shell.write('echo "<$(stty size)>"\n');
    await until(() => seen.includes('<30 100>'), { describe: 'the size changes' });
    const ended = new Promise((resolve) => shell.once('end', resolve));
    shell.write('exit 3\n');
    shell.resume();
    await ended;
    assert.equal(await shell.exitCode, 3, "the shell's exit code");
  });

  test('exec runs a command in the named container, as its user with its variables; an abort kills it', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('exec', { hostname: 'exec-host' });
    const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', GREETING: 'hello' };
    await p.start(container(out, 'main', ['sleep', '1000'], { uid: 1000, gid: 1000, env }));
    const script = 'echo "$(id -u)|$(hostname)|$GREETING|$(ls /proc | grep -c "^[0-9]")"; exit 4';
    const done = await p.exec('main', ['sh', '-c', script], new AbortController().signal);
    // The container's pid namespace: a handful of processes (its init, sleep, the command's), not the host's.
    assert.match(done.output, /^1000\|exec-host\|hello\|[1-9]\n$/);
    assert.equal(done.exitCode, 4);
    await assert.rejects(
      p.exec('other', ['true'], new AbortController().signal),
      /no running container other/,
    );
    const abort = new AbortController();
    const hung = p.exec('main', ['sleep', '1000'], abort.signal);
    abort.abort(new Error('timed out'));
    await assert.rejects(hung, /timed out/);
  });

  test('connect reaches a port the pod listens on', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const p = await pod('listening');
    await p.start(container(out, 'server', serverArgv(9090, 'hello from the pod')));
    let reply = '';
    await until(
      async () => {
        try {
          const socket = await p.connect(9090);
          reply = await new Response(socket as unknown as ReadableStream).text();
          return true;
        } catch {
          return false;
        }
      },
      { describe: 'the server answers' },
    );
    assert.equal(reply, 'hello from the pod');
  });
});

describe('unsandboxed local runtime', { skip: skip ?? false }, () => {
  test('runs plain processes with env, cwd and user, and refuses files it cannot place', async (t) => {
    const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-unsandboxed-'));
    const runtime = await createRuntime({ stateDir, unsandboxed: true });
    const out = await outputDir(t);
    t.after(async () => {
      await runtime.close();
      await rm(stateDir, { recursive: true, force: true });
    });
    assert.match(runtime.warnings.join('\n'), /nothing is isolated/);
    const p = await runtime.createPod({
      name: `plain-${process.pid}`,
      jobId: 'plain',
      owner: 'default',
      hostname: 'plain',
      limits: { cpuMillis: null, memoryBytes: null, pids: null },
      shmBytes: null,
    });
    t.after(() => p.destroy(0));
    assert.match(p.ip, /^127\./);
    const spec = container(out, 'main', ['sh', '-c', 'echo "$(id -u) $(pwd) $GREETING [$HOME]"'], {
      env: { PATH: '/usr/bin:/bin', GREETING: 'hi' },
      workingDir: '/usr',
      uid: 1000,
      gid: 1000,
    });
    assert.deepEqual(await (await p.start({ ...spec, hostUid: 1000, hostGid: 1000 })).exited, {
      exitCode: 0,
      signal: null,
      oomKilled: false,
    });
    assert.equal(await output(spec), '1000 /usr hi []\n');
    const withFile = container(out, 'file', ['true'], {
      files: [{ path: '/etc/x', content: '', mode: 0o644 }],
    });
    await assert.rejects(p.start({ ...withFile, hostUid: 0, hostGid: 0 }), /cannot place \/etc\/x/);
  });
});
