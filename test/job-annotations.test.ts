import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { JobState } from '../src/model/job.ts';
import type { JobChanges, NewJob } from '../src/store/jobs.ts';
import { MIGRATIONS, sqliteSql } from '../src/store/migrations.ts';
import type { Store } from '../src/store/store.ts';
import { rawStore } from './support/raw-store.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';

// A job's build is saved once, before its first submission, and removed at its end; what the
// plugins read of it at every start and end is its annotations, kept in a column of their own, so
// that reads of jobs (the leader's, with every update) leave the build out. The build is read only
// to hand a job built before to the backend again (JobStore.builds).

const T0 = Date.UTC(2026, 0, 1);
const SPEC = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'cpu-1', category: 'cpu', provider: 'local' },
};

function newJob(id: string): NewJob {
  return {
    id,
    createdBy: 'alice',
    project: null,
    application: 'mpi-hello',
    createdAt: T0,
    specification: SPEC,
    timeAllocationMs: null,
    pricePerUnit: 1,
    firstUpdate: { timestamp: T0, state: 'IN_QUEUE', status: 'made by the test' },
  };
}

/** A build as the store keeps it: its annotations are only those of its Volcano Job. */
function buildOf(annotations: Record<string, string> | undefined): string {
  return JSON.stringify({
    volcanoJob: { metadata: { name: 'j', ...(annotations ? { annotations } : {}) } },
    companions: [{ metadata: { annotations: { 'not.this': 'companion' } } }],
  });
}

/** Writes an update of the job with these column changes, as the leader does. */
async function change(store: Store, id: string, changes: JobChanges, state?: JobState): Promise<void> {
  await store.transaction(async (tx) => {
    const job = await tx.jobs.get(id);
    assert.ok(job);
    await tx.jobs.appendUpdate(
      job,
      { timestamp: T0 + job.updateCount, ...(state ? { state } : {}) },
      changes,
    );
  });
}

for (const kind of STORE_KINDS) {
  describe(`job annotations (${kind})`, () => {
    test('a saved build: its annotations come with the job, the build only from builds(); gone at the end', async () => {
      const store = await openTestStore(kind);
      try {
        await store.jobs.insert([newJob('j1'), newJob('j2')]);
        assert.equal((await store.jobs.get('j1'))?.annotations, null);
        assert.deepEqual(await store.jobs.builds(['j1', 'j2']), new Map());

        const json = buildOf({ 'ucompute.io/a': '1', 'ucompute.io/b': 'two' });
        await change(store, 'j1', {
          build: { json, annotations: { 'ucompute.io/a': '1', 'ucompute.io/b': 'two' } },
        });
        const saved = await store.jobs.get('j1');
        assert.deepEqual(saved?.annotations, { 'ucompute.io/a': '1', 'ucompute.io/b': 'two' });
        assert.ok(Object.isFrozen(saved?.annotations));
        assert.equal(Object.hasOwn(saved!, 'build'), false, 'a read of a job leaves its build out');
        assert.deepEqual((await store.jobs.getMany(['j1', 'j2'])).get('j1')?.annotations, saved?.annotations);
        assert.deepEqual(
          (await store.jobs.active()).find((j) => j.id === 'j1')?.annotations,
          saved?.annotations,
        );
        assert.deepEqual(await store.jobs.builds(['j1', 'j2', 'j1', 'none']), new Map([['j1', json]]));

        // Other changes keep it; the end removes both.
        await change(store, 'j1', { submitted: true });
        assert.deepEqual((await store.jobs.get('j1'))?.annotations, saved?.annotations);
        await change(store, 'j1', { state: 'FAILURE', build: null }, 'FAILURE');
        assert.equal((await store.jobs.get('j1'))?.annotations, null);
        assert.deepEqual(await store.jobs.builds(['j1']), new Map());
      } finally {
        await store.close();
      }
    });

    test('jobs kept before the migration get their annotations from their builds', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'job-annotations-'));
      const db = await rawStore(kind, dir);
      try {
        // The store as it was before the annotations migration (later ones come after it).
        const before = MIGRATIONS.findIndex((m) => sqliteSql(m).includes('add column annotations'));
        assert.ok(before > 0);
        await db.exec('create table schema_version (version integer not null)');
        for (let v = 0; v < before; v++) await db.exec(db.dialect(MIGRATIONS[v]!));
        await db.exec(`insert into schema_version (version) values (${before})`);
        const insert = (id: string, state: string, build: string | null) =>
          db.exec(
            `insert into jobs (id, created_by, project, state, application, created_at, specification,
               price_per_unit, build)
             values ('${id}', 'alice', null, '${state}', 'mpi-hello', ${T0}, '${JSON.stringify(SPEC)}', 1,
               ${build === null ? 'null' : `'${build}'`})`,
          );
        const annotated = buildOf({ 'ucompute.io/a': '1' });
        await insert('old1', 'RUNNING', annotated);
        await insert('old2', 'IN_QUEUE', buildOf(undefined));
        await insert('old3', 'SUCCESS', null);
        const store = await db.open();
        try {
          const jobs = await store.jobs.getMany(['old1', 'old2', 'old3']);
          assert.deepEqual(jobs.get('old1')?.annotations, { 'ucompute.io/a': '1' });
          assert.deepEqual(jobs.get('old2')?.annotations, {});
          assert.equal(jobs.get('old3')?.annotations, null);
          assert.equal((await store.jobs.builds(['old1', 'old3'])).get('old1'), annotated);
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
