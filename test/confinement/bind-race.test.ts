/**
 * A job owns its storage folder and may change it at any moment, also while the server binds a
 * folder of it into another pod: the bind must be of what was checked, or nothing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { container, missingPrerequisite, outputDir, testRuntime } from '../support/local-runtime.ts';
import { needs } from '../support/local-tools.ts';

const skip = (await missingPrerequisite()) ?? (await needs('perl')).skip ?? null;

const STARTS = 200;
const AT_ONCE = 8;

/**
 * Swaps `a` and `b` (renameat2 with RENAME_EXCHANGE, x86-64 syscall 316) until killed, for at most
 * `seconds`: at every instant one of them is the folder and the other the symlink.
 */
function flipper(dir: string, a: string, b: string, seconds: number) {
  const script = `chdir $ARGV[0] or die; my $end = time + ${seconds};
while (time < $end) { for (1..1000) { syscall(316, -100, $ARGV[1], -100, $ARGV[2], 2) == 0 or die "renameat2: $!" } }`;
  const child = spawn('perl', ['-e', script, dir, a, b], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    errors += text;
  });
  const ended = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return {
    async stop() {
      child.kill('SIGKILL');
      await ended;
      assert.equal(errors, '', 'the flipper failed');
    },
  };
}

test('a job that flips a folder of its input between a folder and a symlink never gets the symlink’s target bound', {
  skip: skip ?? false,
  timeout: 600_000,
}, async (t) => {
  const { pod } = await testRuntime(t);
  const out = await outputDir(t);
  // What the job must not see: a folder elsewhere on the host (readable, so that a wrong bind shows).
  const elsewhere = join(out, 'elsewhere');
  await mkdir(join(elsewhere, 'in'), { recursive: true });
  await writeFile(join(elsewhere, 'in', 'secret.txt'), 'not yours\n');
  // The job's folder: `data/in` is its input; `data` swaps with a symlink to `elsewhere`.
  const job = join(out, 'job');
  await mkdir(join(job, 'data', 'in'), { recursive: true });
  await writeFile(join(job, 'data', 'in', 'mine.txt'), 'yours\n');
  // Relative, so that it leads to `elsewhere` also from bubblewrap's /oldroot.
  await symlink('../elsewhere', join(job, 'swap'));
  const p = await pod('race');
  const flipping = flipper(job, 'data', 'swap', 300);
  const seen = { mine: 0, refused: 0, wrong: [] as string[] };
  try {
    for (let batch = 0; batch < STARTS / AT_ONCE; batch++) {
      await Promise.all(
        Array.from({ length: AT_ONCE }, async (_, i) => {
          const spec = container(out, `reader-${batch}-${i}`, ['ls', '/work/in'], {
            uid: 1000,
            gid: 1000,
            mounts: [{ source: join(job, 'data', 'in'), target: '/work/in', readOnly: true }],
          });
          try {
            const exit = await (await p.start(spec)).exited;
            const listed = await readFile(spec.stdout, 'utf8');
            const said = await readFile(spec.stderr, 'utf8');
            if (exit.exitCode === 0 && listed === 'mine.txt\n') seen.mine++;
            // bubblewrap resolves the descriptor to a path and binds that; when the path changed
            // meanwhile, it dies before the command runs: it cannot find the path, or the mount is
            // not the descriptor's folder ("Race condition binding dirfd").
            else if (exit.exitCode !== 0 && listed === '' && /^bwrap: /.test(said)) seen.refused++;
            else seen.wrong.push(`${listed}${said}`);
          } catch (error) {
            assert.match((error as Error).message, /is a symlink|does not exist/);
            seen.refused++;
          }
        }),
      );
    }
  } finally {
    await flipping.stop();
  }
  assert.deepEqual(seen.wrong, [], `pods saw something else than the job's input (${JSON.stringify(seen)})`);
  assert.ok(seen.mine > 0 && seen.refused > 0, `the race was not run: ${JSON.stringify(seen)}`);
});
