import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { JobState } from '../src/model/job.ts';
import type { Owner } from '../src/model/owner.ts';
import type { NewJob } from '../src/store/jobs.ts';
import { MIGRATIONS, sqliteSql } from '../src/store/migrations.ts';
import { rawStore } from './support/raw-store.ts';
import { STORE_KINDS } from './support/store.ts';

// What an owner's active jobs hold back in a category (JobStore.heldCredits) is summed on every
// charge and intake: it reads the jobs' product_category column through a partial index, never
// their specifications' JSON (one parse per active job: 2,500 live jobs of one owner took a
// charge to ~5 s).

const T0 = Date.UTC(2026, 0, 1);

function job(
  id: string,
  owner: Owner,
  category: string,
  reservedCredits: number,
  state: JobState = 'IN_QUEUE',
): NewJob {
  return {
    id,
    createdBy: owner.createdBy,
    project: owner.project ?? null,
    application: 'mpi-hello',
    createdAt: T0,
    specification: {
      application: { name: 'mpi-hello', version: '1.0' },
      product: { id: `${category}-1`, category, provider: 'local' },
    },
    timeAllocationMs: null,
    pricePerUnit: 1,
    reservedCredits,
    firstUpdate: { timestamp: T0, state, status: 'made by the test' },
  };
}

const alice: Owner = { createdBy: 'alice' };
const inLab: Owner = { createdBy: 'alice', project: 'lab' };

for (const kind of STORE_KINDS) {
  describe(`held credits (${kind})`, () => {
    test("one owner's 2,500 active jobs: the sum is right, read from the column, not the specification", async () => {
      const dir = mkdtempSync(join(tmpdir(), 'held-credits-'));
      const db = await rawStore(kind, dir);
      let store = await db.open();
      try {
        let expected = 0;
        await store.transaction(async (tx) => {
          for (let i = 0; i < 2_500; i++) {
            await tx.jobs.insert([job(`a${i}`, alice, 'cpu', i % 7)]);
            expected += i % 7;
          }
          // What must not count: another category, the same user's project, another user, ended jobs.
          for (let i = 0; i < 50; i++) {
            await tx.jobs.insert([
              job(`g${i}`, alice, 'gpu', 100),
              job(`p${i}`, inLab, 'cpu', 100),
              job(`b${i}`, { createdBy: 'bob' }, 'cpu', 100),
              job(`e${i}`, alice, 'cpu', 100, 'SUCCESS'),
            ]);
          }
        });
        assert.equal(await store.jobs.heldCredits(alice, 'cpu'), expected);
        assert.equal(await store.jobs.heldCredits(alice, 'gpu'), 5_000);
        assert.equal(await store.jobs.heldCredits(inLab, 'cpu'), 5_000);
        assert.equal(await store.jobs.heldCredits(inLab, 'gpu'), 0);
        const gpu = await store.jobs.browse({ visibility: 'all', productCategory: 'gpu', limit: 100 });
        assert.equal(gpu.length, 50);

        // The specifications no longer name a category: the sums are the same (no JSON is read).
        await store.close();
        await db.exec(`update jobs set specification = '{}'`);
        store = await db.open();
        assert.equal(await store.jobs.heldCredits(alice, 'cpu'), expected);
        assert.equal(await store.jobs.heldCredits(inLab, 'cpu'), 5_000);
      } finally {
        await store.close();
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test('jobs kept before the migration get their category from their specification', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'held-credits-'));
      const db = await rawStore(kind, dir);
      try {
        // The store as it was before the product-category migration (later ones come after it).
        const before = MIGRATIONS.findIndex((m) => sqliteSql(m).includes('add column product_category'));
        assert.ok(before > 0);
        await db.exec('create table schema_version (version integer not null)');
        for (let v = 0; v < before; v++) await db.exec(db.dialect(MIGRATIONS[v]!));
        await db.exec(`insert into schema_version (version) values (${before})`);
        const insert = (
          id: string,
          project: string | null,
          category: string,
          state: string,
          credits: number,
        ) =>
          db.exec(
            `insert into jobs (id, created_by, project, state, application, created_at, specification,
               price_per_unit, reserved_credits)
             values ('${id}', 'alice', ${project === null ? 'null' : `'${project}'`}, '${state}', 'mpi-hello', ${T0},
               '${JSON.stringify(job(id, alice, category, credits).specification)}', 1, ${credits})`,
          );
        await insert('old1', null, 'cpu', 'RUNNING', 3);
        await insert('old2', null, 'cpu', 'IN_QUEUE', 4);
        await insert('old3', null, 'gpu', 'RUNNING', 5);
        await insert('old4', 'lab', 'cpu', 'RUNNING', 6);
        await insert('old5', null, 'cpu', 'SUCCESS', 7);
        const store = await db.open();
        try {
          assert.equal(await store.jobs.heldCredits(alice, 'cpu'), 7);
          assert.equal(await store.jobs.heldCredits(alice, 'gpu'), 5);
          assert.equal(await store.jobs.heldCredits(inLab, 'cpu'), 6);
          const cpu = await store.jobs.browse({ visibility: 'all', productCategory: 'cpu', limit: 10 });
          assert.deepEqual(cpu.map((j) => j.id).sort(), ['old1', 'old2', 'old4', 'old5']);
        } finally {
          await store.close();
        }
      } finally {
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
