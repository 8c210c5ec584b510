/**
 * Jobs on the local backend and their storage: a non-root app writes its own output, and a
 * symlink one job plants never gives another job a host path.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { TaskSpec } from '../../src/volcano/api/types.ts';
import { openTestBackend } from '../support/local-backend.ts';
import { missingPrerequisite } from '../support/local-runtime.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const prerequisite = await missingPrerequisite();
const tools = prerequisite ? { skip: prerequisite } : {};
const CLAIM = 'ucompute-storage';
const JOB_UID = 11042;

/** The backend on a bridge of its own (the tasks' image is not in the store: they run on the host view). */
async function open(t: { after(fn: () => Promise<void>): void }) {
  const { home, backend, ended } = await openTestBackend(t);
  return { storageRoot: join(home, 'storage'), backend, ended };
}

/** A task of owner `namespace`'s job running `script` as `uid`, with storage sub-paths mounted. */
function storageTask(
  script: string,
  uid: number,
  mounts: { subPath: string; mountPath: string; readOnly?: boolean }[],
) {
  const task: TaskSpec = shellTask('main', 1, script);
  const spec = task.template.spec;
  spec.securityContext = { runAsUser: uid, runAsGroup: uid };
  spec.volumes = [{ name: 'storage', persistentVolumeClaim: { claimName: CLAIM } }];
  spec.containers[0]!.volumeMounts = mounts.map((m) => ({ name: 'storage', ...m }));
  return task;
}

test('a non-root app writes /work/result.txt; it lands owned by its owner’s host uid', tools, async (t) => {
  const { storageRoot, backend, ended } = await open(t);
  // The job folder exists, made by ucompute as root (the FileMount plugin does so).
  await mkdir(join(storageRoot, 'home/alice/Jobs/app/one'), { recursive: true });
  const job = vcjob('one', [
    storageTask('id -u > /work/result.txt', JOB_UID, [
      { subPath: 'home/alice/Jobs/app/one', mountPath: '/work' },
    ]),
  ]);
  job.metadata.namespace = 'alice';
  await backend.submitVolcanoJob('one', job);
  const end = await ended('one');
  assert.equal(end.state, 'SUCCESS', end.status);
  const result = join(storageRoot, 'home/alice/Jobs/app/one/result.txt');
  assert.equal(await readFile(result, 'utf8'), `${JOB_UID}\n`);
  const owner = (await stat(result)).uid;
  assert.ok(owner >= 1_000_000 && (owner - JOB_UID) % 65536 === 1_000_000 % 65536, `owned by ${owner}`);
});

test(
  'a job that plants /work/hostroot -> / and passes it to another job does not give it the host',
  tools,
  async (t) => {
    const { storageRoot, backend, ended } = await open(t);
    const folder = 'home/alice/Jobs/app/planter';
    await mkdir(join(storageRoot, folder), { recursive: true });
    const planter = vcjob('planter', [
      storageTask('ln -s / /work/hostroot && ln -s /etc/shadow /work/shadow.txt', JOB_UID, [
        { subPath: folder, mountPath: '/work' },
      ]),
    ]);
    planter.metadata.namespace = 'alice';
    await backend.submitVolcanoJob('planter', planter);
    assert.equal((await ended('planter')).state, 'SUCCESS');
    for (const [name, input] of [
      ['folder', `${folder}/hostroot`],
      ['file', `${folder}/shadow.txt`],
    ] as const) {
      const id = `reader-${name}`;
      const reader = vcjob(id, [
        storageTask('ls /work/in; cat /work/in', 0, [
          { subPath: input, mountPath: '/work/in', readOnly: true },
        ]),
      ]);
      reader.metadata.namespace = 'alice';
      await backend.submitVolcanoJob(id, reader);
      const end = await ended(id);
      assert.equal(end.state, 'FAILURE', `the ${name} input was mounted: ${end.status}`);
      assert.match(end.status ?? '', /is a symlink/);
    }
  },
);

test(
  'a sub-path the backend creates in a claim is never created through a symlink a job planted there',
  tools,
  async (t) => {
    const { home, backend, ended } = await openTestBackend(t);
    // An earlier job of the claim made `link` point at a host folder.
    const elsewhere = await mkdtemp(join(tmpdir(), 'ucompute-elsewhere-'));
    t.after(() => rm(elsewhere, { recursive: true, force: true }));
    const claim = join(home, 'local', 'claims', 'scratch');
    await mkdir(claim, { recursive: true });
    await symlink(elsewhere, join(claim, 'link'));
    const task: TaskSpec = shellTask('main', 1, 'ls /scratch');
    const spec = task.template.spec;
    spec.volumes = [{ name: 'scratch', persistentVolumeClaim: { claimName: 'scratch' } }];
    spec.containers[0]!.volumeMounts = [{ name: 'scratch', mountPath: '/scratch', subPath: 'link/made' }];
    await backend.submitVolcanoJob('subpath', vcjob('subpath', [task]));
    const end = await ended('subpath');
    assert.equal(end.state, 'FAILURE', end.status);
    assert.match(end.status ?? '', /subPath: link in link\/made is not a folder/);
    assert.deepEqual(await readdir(elsewhere), []);
  },
);
