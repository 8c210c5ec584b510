import assert from 'node:assert/strict';
import { lstat, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { VolcanoJob } from '../../src/volcano/api/types.ts';
import { OUTPUT_FOLDER_ANNOTATION } from '../../src/volcano/labels.ts';
import { openTestBackend } from '../support/local-backend.ts';
import { needs } from '../support/local-tools.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const tools = await needs('bwrap', 'nft', 'ip');
const JOB_UID = 11042;

/** A job of `uid` with its job folder at /work, whose output the backend saves there at the end. */
function jobWithFolder(name: string, folder: string, uid: number, script: string): VolcanoJob {
  const task = shellTask('main', 1, script);
  task.template.spec.securityContext = { runAsUser: uid, runAsGroup: uid };
  task.template.spec.volumes = [{ name: 'work', persistentVolumeClaim: { claimName: 'ucompute-storage' } }];
  task.template.spec.containers[0]!.volumeMounts = [{ name: 'work', mountPath: '/work', subPath: folder }];
  const job = vcjob(name, [task]);
  job.metadata.annotations = { [OUTPUT_FOLDER_ANNOTATION]: folder };
  return job;
}

test(
  'a job that makes /work/stdout-0.log a symlink to a host file leaves that file untouched',
  tools,
  async (t) => {
    const { home, backend, ended } = await openTestBackend(t);
    const victim = join(home, 'victim.txt');
    await writeFile(victim, 'original\n');
    const folder = 'home/alice/Jobs/1';
    const jobFolder = join(home, 'storage', folder);
    // Made by ucompute (root): the job's container user gets it, as its owner's host ids.
    await mkdir(jobFolder, { recursive: true });
    await backend.submitVolcanoJob(
      'planted',
      jobWithFolder('planted', folder, JOB_UID, `ln -s ${victim} /work/stdout-0.log; echo the output`),
    );
    const end = await ended('planted');
    assert.equal(end.state, 'SUCCESS', end.status);
    assert.equal(await readFile(victim, 'utf8'), 'original\n', 'the host file is untouched');
    assert.ok(
      (await lstat(join(jobFolder, 'stdout-0.log'))).isSymbolicLink(),
      "the job's own name is left alone",
    );
    assert.equal(await readFile(join(jobFolder, 'stdout-0.1.log'), 'utf8'), 'the output\n');
    const saved = await stat(join(jobFolder, 'stdout-0.1.log'));
    const owner = (await stat(jobFolder)).uid;
    assert.notEqual(owner, 0, 'the job folder is the container user’s');
    assert.equal(saved.uid, owner, "the copy is written as the job folder's owner, not as root");
  },
);

test('a job that takes both names of its output copy ends FAILURE saying so', tools, async (t) => {
  const { home, backend, ended } = await openTestBackend(t);
  const folder = 'home/alice/Jobs/2';
  await mkdir(join(home, 'storage', folder), { recursive: true });
  await backend.submitVolcanoJob(
    'taken',
    jobWithFolder(
      'taken',
      folder,
      0,
      'echo mine > /work/stdout-0.log; echo mine > /work/stdout-0.1.log; echo out',
    ),
  );
  const end = await ended('taken');
  assert.equal(end.state, 'FAILURE');
  assert.equal(
    end.status,
    'Could not save the output of rank 0: stdout-0.log and stdout-0.1.log already exist in the job folder',
  );
  assert.equal(await readFile(join(home, 'storage', folder, 'stdout-0.log'), 'utf8'), 'mine\n');
});
