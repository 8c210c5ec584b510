import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openTestBackend } from '../support/local-backend.ts';
import { needs } from '../support/local-tools.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const tools = await needs('bwrap', 'nft', 'ip');
const MiB = 2 ** 20;
/**
 * The log's size: six readers holding all of it at once (the fault this catches) would hold three
 * times the bound below; a larger log only makes the test slower.
 */
const LOG_CHARS = 64_000_000;

test(
  'six readers of a 64 MB log each get all of it while the server grows by less than 128 MB',
  tools,
  async (t) => {
    const { backend, ended } = await openTestBackend(t, {
      config: { logs: { maxSizeBytes: 256 * MiB, maxFiles: 2 } },
    });
    const script = `head -c ${LOG_CHARS} /dev/zero | tr '\\0' x`;
    await backend.submitVolcanoJob('flood', vcjob('flood', [shellTask('main', 1, script)]));
    assert.equal((await ended('flood', 60_000)).state, 'SUCCESS');
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    const read = async () => {
      let chars = 0;
      for await (const chunk of backend.logs('flood', { follow: false })) {
        chars += chunk.stdout?.length ?? 0;
        assert.ok((chunk.stdout?.length ?? 0) <= 64 * 1024, 'a chunk is at most 64 KiB');
      }
      return chars;
    };
    const counts = await Promise.all(Array.from({ length: 6 }, read));
    clearInterval(sampler);
    assert.deepEqual(counts, Array(6).fill(LOG_CHARS));
    // Six readers pass 384 MB of text through the server; what stays bounded is what they hold at
    // once (chunks and their garbage until a collection: 60 to 102 MB measured with 200 MB logs),
    // never the log's size (six unbounded readers of 200 MB logs held 2.6 GB).
    const growth = (peak - before) / MiB;
    assert.ok(growth < 128, `the server grew by ${growth.toFixed(0)} MB`);
  },
);

test('the logs of a rotated log are its newest part, never nothing', tools, async (t) => {
  const { backend, ended, output } = await openTestBackend(t, {
    config: { logs: { maxSizeBytes: 64 * 1024, maxFiles: 2 } },
  });
  const script = "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo THE-END";
  await backend.submitVolcanoJob('rotated', vcjob('rotated', [shellTask('main', 1, script)]));
  assert.equal((await ended('rotated')).state, 'SUCCESS');
  const text = (await output('rotated'))[0] ?? '';
  assert.ok(text.length > 64 * 1024 && text.length <= 128 * 1024, `${text.length} characters kept`);
  assert.match(text, /^x+\nTHE-END\n$/);
});
