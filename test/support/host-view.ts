/**
 * One copy of the host's filtered /etc shared by the runtimes the tests make: the suite's, when the
 * runner (test/run-suite.ts) made one and names it in UCOMPUTE_TEST_HOST_VIEW, or else this test
 * process's own. A runtime copies /etc (~1,340 entries) into its state folder at its first start,
 * most of a CPU second of kernel time; the tests' own runtimes were a fifth of the test processes'
 * CPU samples in a full suite, and one copy per test process was still most of a suite's copies. A
 * runtime reuses a copy of the same /etc that its `host-view` folder already holds, so the tests'
 * state folders get that folder as a link to the shared one. The runtime's own copy (a fresh state
 * folder, /etc changed) is tested in test/local-runtime.test.ts, which does not use this.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readlink, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostView } from '../../src/backends/local/host-view.ts';

/** The variable that names the suite's folder to the test processes. */
export const SUITE_HOST_VIEW = 'UCOMPUTE_TEST_HOST_VIEW';

/**
 * A folder for runtimes' `host-view` links, its /etc copy made now; removed when this process
 * exits. Containers' host users pass through it to the copy, as through a state folder.
 */
export async function newHostView(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-host-view-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o711);
  await hostView(dir);
  return dir;
}

let shared: Promise<string> | undefined;

/** Makes `runtimeStateDir`/host-view a link to the shared folder. */
export async function sharedHostView(runtimeStateDir: string): Promise<void> {
  const suite = process.env[SUITE_HOST_VIEW];
  shared ??= suite ? Promise.resolve(suite) : newHostView();
  const dir = await shared;
  await mkdir(runtimeStateDir, { recursive: true });
  const link = join(runtimeStateDir, 'host-view');
  // A restart of ucompute on the same state folder (the restart tests) finds its link made.
  await symlink(dir, link).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST' || (await readlink(link).catch(() => '')) !== dir) throw error;
  });
}
