import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { container, errors, missingPrerequisite, outputDir, testRuntime } from '../support/local-runtime.ts';

const skip = await missingPrerequisite();
const MAX = 64 * 1024;

describe('container output', { skip: skip ?? false }, () => {
  test('a flood of output is capped: rotated at the size, the oldest files dropped, the tail kept', async (t) => {
    const { pod, stateDir } = await testRuntime(t, { logs: { maxSizeBytes: MAX, maxFiles: 3 } });
    const out = await outputDir(t);
    const p = await pod('flood');
    assert.equal(
      (await stat(join(stateDir, 'pods', p.name))).mode & 0o777,
      0o711,
      'pod state is not listable',
    );
    const flood = container(out, 'flood', [
      'sh',
      '-c',
      "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo to-stderr >&2; echo END-OF-OUTPUT",
    ]);
    assert.equal((await (await p.start(flood)).exited).exitCode, 0);
    const files = (await readdir(out)).filter((f) => f.startsWith('flood.out')).sort();
    assert.deepEqual(files, ['flood.out', 'flood.out.1', 'flood.out.2']);
    for (const f of files) {
      const { size } = await stat(join(out, f));
      assert.ok(size <= MAX, `${f} holds ${size} bytes, at most ${MAX}`);
    }
    assert.equal((await stat(join(out, 'flood.out.1'))).size, MAX, 'a rotated file is full');
    assert.match(await readFile(join(out, 'flood.out'), 'utf8'), /x*\nEND-OF-OUTPUT\n$/);
    assert.equal(await errors(flood), 'to-stderr\n', 'stderr is kept apart');
  });

  test('a long line and binary output pass through whole, across rotated files', async (t) => {
    const { pod } = await testRuntime(t, { logs: { maxSizeBytes: MAX, maxFiles: 4 } });
    const out = await outputDir(t);
    const p = await pod('long-line');
    // 150,000 bytes without a newline, then every byte value once.
    const spec = container(out, 'long', [
      'sh',
      '-c',
      "head -c 150000 /dev/zero | tr '\\0' y; printf \"$(printf '\\\\%03o' $(seq 0 255))\"",
    ]);
    await (await p.start(spec)).exited;
    const parts = ['long.out.2', 'long.out.1', 'long.out'].map((f) => readFile(join(out, f)));
    const whole = Buffer.concat(await Promise.all(parts));
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    assert.equal(whole.length, 150_000 + 256);
    assert.ok(whole.subarray(0, 150_000).equals(Buffer.alloc(150_000, 'y')), 'the long line is whole');
    assert.ok(whole.subarray(150_000).equals(bytes), 'binary output is untouched');
  });
});
