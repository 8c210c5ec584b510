import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { LocalContext } from '../src/backends/local/controller/context.ts';
import type { JobRun, SavedJob } from '../src/backends/local/controller/job-run.ts';
import { savedJobs, saveRun } from '../src/backends/local/controller/persistence.ts';

/** A job's state files in the local backend's jobs folder (controller/persistence.ts). */

async function jobsFolder(t: { after(fn: () => Promise<void>): void }) {
  const jobsDir = await mkdtemp(join(tmpdir(), 'ucompute-state-files-'));
  t.after(() => rm(jobsDir, { recursive: true, force: true }));
  // What saveRun and savedJobs use of the backend's context.
  const ctx = { jobsDir, reports: { tellPhase() {} }, runs: new Map() } as unknown as LocalContext;
  return { jobsDir, ctx };
}

/** The part of a run that is saved (savedJob reads these fields). */
function run(id: string, phase: string): JobRun {
  return {
    id,
    job: { metadata: { name: id } },
    companions: [],
    phase,
    retryCount: 0,
    admitted: true,
    submittedAt: 1,
    plugins: {},
    pods: new Map(),
  } as unknown as JobRun;
}

const saved = (id: string, phase: string, number: number) =>
  `${number}\n${JSON.stringify({ ...run(id, phase), pods: [] } as unknown as SavedJob)}`;

test("a job's state alternates between two files rewritten in place; none is made or replaced after the first two saves", async (t) => {
  const { jobsDir, ctx } = await jobsFolder(t);
  const id = `alternating-${process.pid}`;
  await mkdir(join(jobsDir, id));
  const r = run(id, 'Pending');
  await saveRun(ctx, r);
  r.phase = 'Running';
  await saveRun(ctx, r);
  const inodes = async () =>
    Promise.all(['state.0.json', 'state.1.json'].map(async (f) => (await stat(join(jobsDir, id, f))).ino));
  const first = await inodes();
  for (const phase of ['Completing', 'Completed', 'Completed'] as const) {
    r.phase = phase;
    await saveRun(ctx, r);
  }
  r.cause = 'the last save';
  await saveRun(ctx, r);
  assert.deepEqual(await inodes(), first, 'the same two files');
  assert.deepEqual((await readdir(join(jobsDir, id))).sort(), ['state.0.json', 'state.1.json']);
  assert.equal((await stat(join(jobsDir, id, 'state.0.json'))).mode & 0o777, 0o600);
  const [back] = await savedJobs(ctx);
  assert.equal(back?.phase, 'Completed');
  assert.equal(back?.cause, 'the last save');
});

test('the newest whole save is read: one cut short leaves the one before; an older ucompute’s state.json is read; a folder without a whole save is removed', async (t) => {
  const { jobsDir, ctx } = await jobsFolder(t);
  const ids = ['torn', 'newer', 'legacy', 'none'].map((name) => `${name}-${process.pid}`);
  const [torn, newer, legacy, none] = ids as [string, string, string, string];
  for (const id of ids) await mkdir(join(jobsDir, id));
  // Save 4 was being written over save 2 when the machine stopped; save 3 is whole.
  await writeFile(join(jobsDir, torn, 'state.1.json'), saved(torn, 'Running', 3));
  await writeFile(join(jobsDir, torn, 'state.0.json'), saved(torn, 'Completed', 4).slice(0, 30));
  await writeFile(join(jobsDir, newer, 'state.0.json'), saved(newer, 'Completed', 6));
  await writeFile(join(jobsDir, newer, 'state.1.json'), saved(newer, 'Running', 5));
  await writeFile(
    join(jobsDir, legacy, 'state.json'),
    JSON.stringify({ ...run(legacy, 'Running'), pods: [] }),
  );
  await writeFile(join(jobsDir, none, 'state.1.json'), saved(none, 'Pending', 1).slice(0, 12));
  const found = new Map((await savedJobs(ctx)).map((s) => [s.id, s.phase]));
  assert.deepEqual(
    Object.fromEntries(found),
    { [torn]: 'Running', [newer]: 'Completed', [legacy]: 'Running' },
    'each job as its newest whole save',
  );
  assert.deepEqual(
    (await readdir(jobsDir)).sort(),
    [legacy, newer, torn].sort(),
    'the job never saved whole is removed',
  );
  // The next save of a job read back goes after its newest: save 7 into state.1.json.
  const r = run(newer, 'Completed');
  r.cause = 'after the restart';
  await saveRun(ctx, r);
  const [again] = (await savedJobs(ctx)).filter((s) => s.id === newer);
  assert.equal(again?.cause, 'after the restart');
});
