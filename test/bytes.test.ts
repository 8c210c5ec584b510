import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes } from '../src/model/bytes.ts';

test('sizes are 1024-based and say so: B, KiB, MiB, GiB, TiB', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(1024), '1.0 KiB');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(5 * 2 ** 20), '5.0 MiB');
  assert.equal(formatBytes(3.25 * 2 ** 30), '3.3 GiB');
  assert.equal(formatBytes(2 ** 50), '1024.0 TiB', 'the largest unit goes on counting');
});
