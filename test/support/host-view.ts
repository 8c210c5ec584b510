/**
 * One copy of the host's filtered /etc per test process, shared by the runtimes its tests make.
 * A runtime copies /etc (~1,340 entries) into its state folder at its first start: 0.4–1.1 CPU-s of
 * kernel time each on this machine, and as much again to remove it with the test's folder; the
 * tests' own runtimes were a fifth of the test processes' CPU samples in a full suite. A runtime
 * reuses a copy of the same /etc that its `host-view` folder already holds, so the tests' state
 * folders get that folder as a link to this process's. The runtime's own copy (a fresh state
 * folder, /etc changed) is tested in test/local-runtime.test.ts, which does not use this.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readlink, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostView } from '../../src/backends/local/host-view.ts';

let shared: Promise<string> | undefined;

/** Makes `runtimeStateDir`/host-view this process's shared folder (a link), its /etc copy made once. */
export async function sharedHostView(runtimeStateDir: string): Promise<void> {
  shared ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ucompute-host-view-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    // Containers' host users pass through it to the copy, as through a state folder.
    chmodSync(dir, 0o711);
    await hostView(dir);
    return dir;
  })();
  const dir = await shared;
  await mkdir(runtimeStateDir, { recursive: true });
  const link = join(runtimeStateDir, 'host-view');
  // A restart of ucompute on the same state folder (the restart tests) finds its link made.
  await symlink(dir, link).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST' || (await readlink(link).catch(() => '')) !== dir) throw error;
  });
}
