import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isJobId, newJobId } from '../src/model/ids.ts';

test('job ids: distinct across the random pool refills, DNS-label safe, ordered by their clock', () => {
  // 5,000 ids use the pool of 1,024 ids' random bytes 4 times over: a pool not refilled, or not
  // advanced, repeats ids.
  const now = Date.UTC(2026, 10, 28);
  const ids = Array.from({ length: 5000 }, () => newJobId(now));
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) {
    assert.ok(isJobId(id), id);
    assert.equal(id.length, now.toString(36).length + 8, id);
  }
  // The random part varies over its whole width (not a counter's low digits only).
  const randoms = new Set(ids.map((id) => id.slice(-8, -4)));
  assert.ok(randoms.size > 4000, `${randoms.size} distinct high random digits of 5,000`);
  assert.ok(newJobId(now + 1) > newJobId(now));
});
