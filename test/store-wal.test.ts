import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqliteStore } from '../src/store/sqlite/store.ts';

/**
 * The write-ahead log stays bounded: one transaction larger than the 64 MiB checkpoint interval
 * (as a burst of backend events can be) grows the log file, and the next checkpoint cuts it back.
 * An unbounded log was part of the memory and disk growth issue 12 measured under load.
 */

const MiB = 1024 * 1024;
test('after a transaction beyond the checkpoint interval the log is cut back to 64 MiB', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ucompute-wal-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = openSqliteStore(join(dir, 'ucompute.db'));
  const wal = () => statSync(join(dir, 'ucompute.db-wal')).size;
  store.database.exec('create table filler (x text)');
  const insert = store.database.prepare('insert into filler values (?)');
  const row = 'x'.repeat(100_000);
  await store.transaction(async () => {
    for (let i = 0; i < 800; i++) insert.run(`${row}${i}`);
  });
  assert.ok(wal() > 70 * MiB, `the big transaction's log is ${wal()} bytes`);
  for (let i = 0; i < 3; i++) await store.transaction(async () => insert.run('small'));
  assert.ok(wal() <= 64 * MiB, `the log is still ${(wal() / MiB).toFixed(1)} MiB`);
  await store.close();
});
