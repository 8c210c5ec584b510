/**
 * A job that hard-links a file it cannot read into its folder must not get it read for it by the
 * server: ucompute refuses to run jobs as root without the kernel's fs.protected_hardlinks.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  PROTECTED_HARDLINKS,
  requireProtectedHardlinks,
} from '../../src/backends/local/hardlink-protection.ts';
import { needs } from '../support/local-tools.ts';

test('jobs are refused unless fs.protected_hardlinks is on', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-sysctl-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sysctl = join(dir, 'protected_hardlinks');
  await writeFile(sysctl, '0\n');
  await assert.rejects(requireProtectedHardlinks(sysctl), /fs.protected_hardlinks is 0/);
  await assert.rejects(requireProtectedHardlinks(join(dir, 'missing')), /fs.protected_hardlinks is unknown/);
  await writeFile(sysctl, '1\n');
  await requireProtectedHardlinks(sysctl);
});

test(
  'on this machine a job’s host user cannot hard-link a root-only file into its folder',
  await needs('setpriv'),
  async (t) => {
    assert.equal((await readFile(PROTECTED_HARDLINKS, 'utf8')).trim(), '1');
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-hardlink-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await chmod(dir, 0o777);
    const link = () =>
      execFileSync(
        'setpriv',
        ['--reuid=1000000', '--regid=1000000', '--clear-groups', 'ln', '/etc/shadow', join(dir, 'shadow')],
        {
          stdio: 'pipe',
        },
      );
    assert.throws(link, /Operation not permitted/);
  },
);
