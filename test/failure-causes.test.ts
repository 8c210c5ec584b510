import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  howItEnded,
  initContainerFailure,
  lastWords,
} from '../src/backends/local/controller/failure-reasons.ts';
import { processBackend } from './support/process-backend.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** A failed container's cause is in the job's updates, not only in a file under the data folder. */

const exited = (exitCode: number, more: object = {}) => ({
  exitCode,
  signal: null,
  oomKilled: false,
  ...more,
});

test('how a container ended, and the last lines of its stderr, cut short', () => {
  assert.equal(howItEnded(exited(3)), 'exited with code 3');
  assert.equal(howItEnded(exited(139, { signal: 'SIGSEGV' })), 'was killed by SIGSEGV');
  assert.equal(
    howItEnded(exited(137, { signal: 'SIGKILL', oomKilled: true })),
    'exceeded its memory limit (OOM-killed)',
  );
  assert.equal(
    howItEnded(exited(1, { sandboxFailure: 'bwrap: execvp /x: No such file' })),
    'could not run: its sandbox failed: bwrap: execvp /x: No such file',
  );
  assert.equal(lastWords('1\n2\n\n3\n4\n5\n6\n'), '2 / 3 / 4 / 5 / 6');
  assert.equal(lastWords(''), '');
  assert.equal(lastWords(`${'x'.repeat(300)}\n`), `${'x'.repeat(200)}…`);
  assert.equal(
    initContainerFailure(1, 'ucloud-compat', exited(126), 'mkdir: /work: Permission denied\n'),
    'Rank 1 failed to start: init container ucloud-compat exited with code 126; its stderr ends: mkdir: /work: Permission denied',
  );
  assert.equal(
    initContainerFailure(0, 'prep', exited(2), ''),
    'Rank 0 failed to start: init container prep exited with code 2',
  );
  assert.equal(
    initContainerFailure(0, 'prep', exited(1, { sandboxFailure: 'bwrap: no' }), 'bwrap: no\n'),
    'Rank 0 failed to start: init container prep could not run: its sandbox failed: bwrap: no',
    "the sandbox's words are not said twice",
  );
});

test("an init container's failure ends the job saying what it wrote to stderr", async (t) => {
  const { backend, ended } = await processBackend(t);
  const task = shellTask('t', 1, 'echo never');
  task.template.spec.initContainers = [
    {
      name: 'prepare',
      image: 'debian',
      command: ['sh', '-c', 'echo starting; echo "cannot reach the licence server" >&2; exit 3'],
    },
  ];
  await backend.submitVolcanoJob('init', vcjob('init', [task]));
  const end = await ended('init');
  assert.equal(end.state, 'FAILURE', end.status);
  assert.equal(
    end.status,
    'Rank 0 failed to start: init container prepare exited with code 3; its stderr ends: cannot reach the licence server',
  );
});
