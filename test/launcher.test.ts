import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startLauncher } from '../src/backends/local/launcher.ts';

/** The runtime's launcher (src/backends/local/launcher.ts): the commands it runs, and their bound. */

test('a command answers with its output; one that runs past the bound is killed and fails, saying so', {
  timeout: 60_000,
}, async (t) => {
  const launcher = startLauncher({ commandTimeoutMs: 300 });
  t.after(() => launcher.close());
  assert.equal(await launcher.run('/bin/echo', ['hello']), 'hello\n');
  // Without a bound, one command blocked in the kernel holds up a pod's start or stop, and the close.
  await assert.rejects(
    launcher.run('/bin/sleep', ['600']),
    /\/bin\/sleep 600 failed: it did not finish within 0\.3 s/,
  );
  await assert.rejects(launcher.run('/bin/sh', ['-c', 'echo broken >&2; exit 3']), /failed: broken/);
});
