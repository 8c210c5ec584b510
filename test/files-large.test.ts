import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type Served, startServe, stopServe } from './support/serve.ts';

/**
 * A 256 MiB file through a real `ucompute serve` (dry backend): up from a generator and down again,
 * with neither the test nor the server holding it. The server's peak resident memory (VmHWM) may
 * grow by half the file's size at most: a server that held the file, going up or coming down,
 * would grow by all of it. (It was 512 MiB: the server's own growth does not depend on the size,
 * and the half costs the suite less CPU; see BENCHMARKS.md.)
 */

const MiB = 1024 * 1024;
const BLOCKS = 256;
/** What the server may grow by: half the file (buffering it would add all 256 MiB). */
const GROWTH_LIMIT = 128 * MiB;

/** Block i of the file: one random MiB with i written over its first bytes, so blocks differ. */
function* blocks(base: Buffer, hash: ReturnType<typeof createHash>): Generator<Uint8Array> {
  for (let i = 0; i < BLOCKS; i++) {
    const block = Buffer.from(base);
    block.writeUInt32BE(i, 0);
    hash.update(block);
    yield block;
  }
}

async function peakMemory(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

test('a 256 MiB file goes up and comes down streamed, in bounded server memory', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-large-'));
  let served: Served | undefined;
  t.after(async () => {
    await stopServe(served);
    await rm(dataDir, { recursive: true, force: true });
  });
  served = await startServe(dataDir);
  const token = (await readFile(join(dataDir, 'admin.token'), 'utf8')).trim();
  const auth = { authorization: `Bearer ${token}` };
  const url = (what: string, path: string) =>
    `${served!.url}/api/files/${what}?path=${encodeURIComponent(path)}`;
  const before = await peakMemory(served.child.pid!);

  const sent = createHash('sha256');
  const generator = blocks(Buffer.alloc(MiB, Math.random().toString(36)), sent);
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = generator.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
  });
  const up = await fetch(url('upload', '/home/local/big.bin'), {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/octet-stream' },
    body,
    duplex: 'half',
  } as RequestInit);
  assert.equal(up.status, 200, await up.clone().text());
  assert.equal(((await up.json()) as { size: number }).size, BLOCKS * MiB);
  assert.equal((await stat(join(dataDir, 'storage/home/local/big.bin'))).size, BLOCKS * MiB);

  const received = createHash('sha256');
  let bytes = 0;
  const down = await fetch(url('download', '/home/local/big.bin'), { headers: auth });
  assert.equal(down.status, 200);
  assert.equal(down.headers.get('content-length'), String(BLOCKS * MiB));
  for await (const chunk of down.body as unknown as AsyncIterable<Uint8Array>) {
    received.update(chunk);
    bytes += chunk.length;
  }
  assert.equal(bytes, BLOCKS * MiB);
  assert.equal(received.digest('hex'), sent.digest('hex'));

  // The last block, by range: its number is 255.
  const tail = await fetch(url('download', '/home/local/big.bin'), {
    headers: { ...auth, range: `bytes=${(BLOCKS - 1) * MiB}-${(BLOCKS - 1) * MiB + 3}` },
  });
  assert.equal(tail.status, 206);
  assert.equal(Buffer.from(await tail.arrayBuffer()).readUInt32BE(0), BLOCKS - 1);

  const peak = await peakMemory(served.child.pid!);
  t.diagnostic(
    `server peak RSS: ${Math.round(before / MiB)} MiB after start, ${Math.round(peak / MiB)} MiB after ${BLOCKS} MiB up and down`,
  );
  assert.ok(
    peak - before < GROWTH_LIMIT,
    `the server's peak RSS grew by ${Math.round((peak - before) / MiB)} MiB`,
  );
});
