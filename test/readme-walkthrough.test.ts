/**
 * The README's "Trying it" block, run as written on a fresh data folder: `serve` started as the
 * block says, every other line in turn, each of which must succeed and print what it should. It
 * all runs in a network and mount namespace of its own (loopback only, a fresh sysfs with the
 * host's cgroups), so the default port and bridge are the test's alone.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { needs } from './support/local-tools.ts';
import { ROOT } from './support/paths.ts';
import { until } from './support/until.ts';

const tools = await needs('bwrap', 'nft', 'ip', 'unshare', 'nsenter', 'mpiexec', 'sshd');

/** The lines of the first `sh` block under "## Trying it", without comments. */
function tryingIt(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Trying it'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'README.md has a sh block under "## Trying it"');
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#\s.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** What a command's output must show, by its subcommand; other lines need only succeed. */
const EXPECTED: [RegExp, (out: string, jobId: string) => void][] = [
  [/^\.\/ucompute apps$/, (out) => assert.match(out, /word-count/)],
  [/^\.\/ucompute run /, (out) => assert.match(out, /SUCCESS, completed \(exit 0/)],
  [/^\.\/ucompute jobs$/, (out, id) => assert.match(out, new RegExp(`${id}.*SUCCESS`))],
  [/^\.\/ucompute show /, (out, id) => assert.ok(out.includes(id), out)],
  [/^\.\/ucompute logs /, (out) => assert.match(out, /^\s*\d+ \S+/m)],
  [/^\.\/ucompute plan .*--output json/, (out) => assert.ok(JSON.parse(out))],
  [/^\.\/ucompute vcjob run /, (out) => assert.match(out, /hello from rank 1/)],
  [/^\.\/ucompute --help$/, (out) => assert.match(out, /serve/)],
];

const COMMAND_TIMEOUT_MS = 180_000;

function run(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

test("the README's Trying it block runs as written", { ...tools, timeout: 15 * 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-readme-'));
  // Passable by others, like /var/lib (root's default): containers' host users reach the data folder.
  chmodSync(dir, 0o711);
  const cgroups = join(dir, 'cgroups');
  const dataDir = join(dir, 'data');
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: join(dir, 'home'), UCOMPUTE_DATA_DIR: dataDir };
  delete env.UCOMPUTE_URL;
  delete env.UCOMPUTE_TOKEN;
  const holder = spawn(
    'unshare',
    [
      '--net',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `mkdir -p ${cgroups} && mount --rbind /sys/fs/cgroup ${cgroups} && mount -t sysfs sysfs /sys && mount --move ${cgroups} /sys/fs/cgroup && ip link set lo up && echo ready && exec sleep 3600`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const background: ChildProcess[] = [];
  t.after(async () => {
    for (const child of background) {
      child.kill('SIGTERM');
      const ended = new Promise((resolve) => child.once('close', resolve));
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await ended;
      clearTimeout(timer);
    }
    holder.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once('data', () => resolve());
    holder.once('close', (code) => reject(new Error(`the namespace holder ended (${code})`)));
  });
  const inside = ['nsenter', '-t', String(holder.pid), '--net', '--mount', `--wd=${ROOT}`, 'sh', '-c'];

  let jobId = '';
  for (const line of tryingIt()) {
    if (line.endsWith('&')) {
      const child = spawn(inside[0]!, [...inside.slice(1), `exec ${line.slice(0, -1)}`], {
        cwd: ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      background.push(child);
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
      });
      child.stderr!.resume();
      const ended = once(child, 'exit').then(() => assert.fail(`${line} ended: ${out}`));
      await Promise.race([
        until(() => /is serving on/.test(out), { describe: `${line} serves`, timeout: 60_000 }),
        ended,
      ]);
      assert.ok(existsSync(join(dataDir, 'admin.token')));
      continue;
    }
    const command = line.replaceAll('JOB_ID', jobId);
    const { code, out } = await run([...inside, command], env);
    assert.equal(code, 0, `${command} failed:\n${out}`);
    if (/^\.\/ucompute run /.test(command)) jobId = /^([a-z0-9]{16})$/m.exec(out)?.[1] ?? '';
    for (const [pattern, check] of EXPECTED) if (pattern.test(command)) check(out, jobId);
  }
  assert.notEqual(jobId, '', 'the block runs a job');
});
