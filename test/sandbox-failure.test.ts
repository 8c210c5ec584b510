import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lastLines } from '../src/backends/local/controller/failure-reasons.ts';
import { sandboxFailure } from '../src/backends/local/sandbox-status.ts';
import { CGROUP_JOIN_FAILED } from '../src/backends/local/supervisor.ts';
import { openTestBackend } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';
import { shellTask, vcjob } from './support/vcjob.ts';

/** A sandbox that fails is a FAILURE with the sandbox's own words, never the application's exit code. */

const STARTED = '{ "child-pid": 12, "mnt-namespace": 1 }\n';

test("the exit of a command bubblewrap ran is the application's; a status without it is the sandbox's", () => {
  assert.equal(sandboxFailure(1, `${STARTED}{ "exit-code": 1 }\n`, 'bwrap: told by the app\n'), null);
  assert.equal(sandboxFailure(137, STARTED, ''), null, 'killed: the signal says what happened');
  assert.equal(
    sandboxFailure(
      1,
      STARTED,
      "some output\nbwrap: Can't find source path /x/root/.bashrc: Permission denied\n",
    ),
    "bwrap: Can't find source path /x/root/.bashrc: Permission denied",
  );
  assert.equal(
    sandboxFailure(126, '', 'ucompute-supervisor: setns /run/netns/x: Invalid argument\n'),
    'ucompute-supervisor: setns /run/netns/x: Invalid argument',
  );
  assert.equal(sandboxFailure(1, STARTED, ''), 'the sandbox failed (status 1) and said nothing');
  assert.equal(
    sandboxFailure(CGROUP_JOIN_FAILED, null, ''),
    "the supervisor could not join the pod's cgroups",
  );
  assert.equal(sandboxFailure(3, null, ''), null, "unsandboxed: no status file, the exit is the command's");
  assert.deepEqual(lastLines('a\n\nb  \nc\n', 2), ['b', 'c']);
});

const tools = await needs('bwrap', 'nft', 'ip');

test("a command the sandbox cannot execute fails the job with the sandbox's reason", tools, async (t) => {
  const { backend, ended } = await openTestBackend(t);
  const task = shellTask('t', 1, 'unused');
  task.template.spec.containers[0]!.command = ['/nonexistent/program'];
  await backend.submitVolcanoJob('noexec', vcjob('noexec', [task]));
  const end = await ended('noexec');
  assert.equal(end.state, 'FAILURE', end.status);
  assert.match(
    end.status,
    /Rank 0 could not run: its sandbox failed: bwrap: execvp \/nonexistent\/program: No such file or directory/,
  );
});

test(
  "an init container the sandbox cannot execute says so, and the application's exit codes stay its own",
  tools,
  async (t) => {
    const { backend, ended } = await openTestBackend(t);
    const task = shellTask('t', 1, 'exit 3');
    task.template.spec.initContainers = [
      { name: 'prepare', image: 'debian', command: ['/nonexistent/init'] },
    ];
    await backend.submitVolcanoJob('noinit', vcjob('noinit', [task]));
    const end = await ended('noinit');
    assert.equal(end.state, 'FAILURE', end.status);
    assert.match(
      end.status,
      /init container prepare could not run: its sandbox failed: bwrap: execvp \/nonexistent\/init/,
    );

    await backend.submitVolcanoJob(
      'exits',
      vcjob('exits', [shellTask('t', 1, 'echo "bwrap: not really" >&2; exit 1')]),
    );
    const own = await ended('exits');
    assert.equal(own.state, 'SUCCESS', own.status);
    assert.deepEqual(own.exitCodes, { 0: 1 });
  },
);
