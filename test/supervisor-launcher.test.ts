import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { PERL, programPath } from '../src/backends/local/programs.ts';
import { SUPERVISOR_NAME, supervisorArguments } from '../src/backends/local/supervisor.ts';
import { requestLine, startSupervisorLauncher } from '../src/backends/local/supervisor-launcher.ts';

/** The supervisors' launcher (supervisor-launcher.pl, forking supervisor.pl's supervise). */

async function tempDir(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-supervisor-launcher-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A supervisor's arguments for `sh -c script`, its state and output in `dir`, without cgroups, namespace or ids. */
const shArgs = (dir: string, script: string) =>
  supervisorArguments({
    stateDir: dir,
    cgroupProcs: [],
    stdout: join(dir, 'out'),
    stderr: join(dir, 'err'),
    netns: null,
    hostIds: null,
    syscalls: null,
    sandboxStatus: null,
    logs: { maxSizeBytes: 1 << 20, maxFiles: 2 },
    argv: ['/bin/sh', '-c', script],
  });

test("a supervisor runs under its name in a session of its own, with the request's folder, variables and descriptors; its end is told after it recorded it", async (t) => {
  const dir = await tempDir(t);
  const launcher = startSupervisorLauncher();
  t.after(() => launcher.close());
  const given = join(dir, 'given');
  await writeFile(given, 'read me\n');
  await mkdir(join(dir, 'bound'));
  const script = [
    'readlink /proc/$$/fd/3 /proc/$$/fd/4',
    'cat <&3',
    'pwd',
    'echo "greeting=$GREETING home=[$HOME]"',
    'tr "\\0" " " < /proc/$PPID/cmdline; echo',
    'sid=$(cut -d" " -f6 /proc/$PPID/stat); [ "$sid" = "$PPID" ] && echo "own session"',
    'exit 7',
  ].join('\n');
  let exitWhenTold: string | null = null;
  let told!: () => void;
  const ended = new Promise<void>((resolve) => {
    told = resolve;
  });
  const pid = await launcher.start(
    {
      args: shArgs(dir, script),
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', GREETING: 'hello there' },
      readFds: [given],
      pathFds: [join(dir, 'bound')],
    },
    () => {
      exitWhenTold = existsSync(join(dir, 'exit')) ? readFileSync(join(dir, 'exit'), 'utf8') : null;
      told();
    },
  );
  await ended;
  assert.equal((await readFile(join(dir, 'pid'), 'utf8')).trim(), String(pid));
  assert.equal(exitWhenTold, '7\n', 'the exit was recorded when its end was told');
  assert.equal(
    await readFile(join(dir, 'out'), 'utf8'),
    [
      given,
      join(dir, 'bound'),
      'read me',
      dir,
      'greeting=hello there home=[]',
      `${SUPERVISOR_NAME} ${dir} `,
      'own session',
      '',
    ].join('\n'),
  );
});

test('a path through a symlink, or one that is not there, is refused and nothing starts', async (t) => {
  const dir = await tempDir(t);
  const launcher = startSupervisorLauncher();
  t.after(() => launcher.close());
  await mkdir(join(dir, 'real'));
  await symlink(join(dir, 'real'), join(dir, 'link'));
  const request = (path: string) => ({
    args: shArgs(dir, 'echo ran'),
    cwd: '/',
    env: {},
    pathFds: [path],
  });
  await assert.rejects(
    launcher.start(request(join(dir, 'link')), () => undefined),
    new RegExp(`${join(dir, 'link')} is a symlink`),
  );
  await assert.rejects(
    launcher.start(request(join(dir, 'none')), () => undefined),
    /does not exist/,
  );
  await assert.rejects(readFile(join(dir, 'pid')), { code: 'ENOENT' });
});

test('descriptors the launcher inherited do not reach the supervisors and their commands', async (t) => {
  const dir = await tempDir(t);
  // Descriptor 100 of the launcher: a pipe it inherits without close-on-exec.
  const launcher = spawn(PERL, [programPath('supervisor-launcher.pl')], {
    stdio: ['pipe', 'pipe', 'inherit', ...Array<'ignore'>(97).fill('ignore'), 'pipe'],
  });
  t.after(() => {
    launcher.stdin!.end();
  });
  const answers = createInterface({ input: launcher.stdout! })[Symbol.asyncIterator]();
  launcher.stdin!.write(
    requestLine(1, { args: shArgs(dir, 'ls /proc/$$/fd; ls /proc/$PPID/fd'), cwd: '/', env: {} }),
  );
  assert.match(String((await answers.next()).value), /^pid 1 \d+$/);
  assert.match(String((await answers.next()).value), /^exited \d+$/);
  const listed = (await readFile(join(dir, 'out'), 'utf8')).split('\n');
  assert.ok(listed.includes('2'), listed.join(' '));
  assert.ok(!listed.includes('100'), `descriptor 100 reached them: ${listed.join(' ')}`);
});
