import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type LogCursor, readLogChunk } from '../src/backends/local/log-files.ts';

async function folder(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-logs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Everything a reader gets from its cursor on, in chunks of the buffer's size. */
async function drain(file: string, cursor: LogCursor | null, buffer = Buffer.alloc(4)) {
  let text = '';
  let at = cursor;
  for (let i = 0; i < 1000; i++) {
    const chunk = await readLogChunk(file, 3, at, buffer);
    if (!chunk) break;
    text += chunk.bytes.toString();
    at = chunk.cursor;
  }
  return { text, cursor: at };
}

test('a reader gets every kept file oldest first, in chunks no larger than its buffer', async (t) => {
  const file = join(await folder(t), '0.main.out');
  await writeFile(`${file}.2`, 'one ');
  await writeFile(`${file}.1`, 'two ');
  await writeFile(file, 'three');
  const sizes: number[] = [];
  let cursor: LogCursor | null = null;
  for (let chunk = await readLogChunk(file, 3, cursor, Buffer.alloc(3)); chunk; ) {
    sizes.push(chunk.bytes.length);
    cursor = chunk.cursor;
    chunk = await readLogChunk(file, 3, cursor, Buffer.alloc(3));
  }
  assert.ok(sizes.every((n) => n <= 3));
  assert.equal((await drain(file, null)).text, 'one two three');
});

test('a follower continues across a rotation where it stopped, and past files rotated away', async (t) => {
  const file = join(await folder(t), '0.main.out');
  await writeFile(file, 'first ');
  const { text, cursor } = await drain(file, null);
  assert.equal(text, 'first ');
  await appendFile(file, 'second ');
  await rename(file, `${file}.1`); // what the writer does when the file is full
  await writeFile(file, 'third');
  assert.equal((await drain(file, cursor)).text, 'second third');
  // Rotated twice more while the reader slept: its file is gone; it goes on at the oldest kept.
  await rename(`${file}.1`, `${file}.2`);
  await rename(file, `${file}.1`);
  await writeFile(file, 'fourth');
  await rm(`${file}.2`);
  assert.equal((await drain(file, cursor)).text, 'thirdfourth');
});

test('a follower at the end of the current file gets nothing, then what is appended', async (t) => {
  const file = join(await folder(t), '0.main.out');
  await writeFile(`${file}.1`, 'old ');
  await writeFile(file, 'new ');
  const { text, cursor } = await drain(file, null);
  assert.equal(text, 'old new ');
  assert.equal(await readLogChunk(file, 3, cursor, Buffer.alloc(4)), null);
  await appendFile(file, 'more');
  assert.equal((await drain(file, cursor)).text, 'more');
});
