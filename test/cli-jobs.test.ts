import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { commandExitCode, OUTCOME_EXIT_CODES, outcomeOf } from '../src/cli/outcome.ts';
import type { Job } from '../src/model/job.ts';
import { failedRanks, type Outcome, type OutcomeKind, presentOutcome } from '../src/model/outcome.ts';
import { assertExit, BIN, CHILD_ENV, runCliHere } from './support/cli.ts';
import { ROOT } from './support/paths.ts';
import {
  outputTail,
  putFile,
  type Served,
  servedJobInState,
  startServe,
  stopServe,
} from './support/serve.ts';
import { until } from './support/until.ts';

/**
 * The client commands for people: job id prefixes, `jobs --watch/--project` with ELAPSED and LEFT,
 * `logs --rank`, usage errors, `apps show`, completion, and a catalogue of several folders that
 * reloads on change. A real `ucompute serve` on the dry backend, jobs held until cancelled; the
 * commands run the CLI's main() in this process, but for `jobs --watch`, which a signal ends.
 */

const TIMEOUT = { timeout: 600_000 };
const { UCOMPUTE_URL: _url, UCOMPUTE_TOKEN: _token, UCOMPUTE_DATA_DIR: _dataDir, ...childEnv } = CHILD_ENV;

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-jobs-'));
const extraApps = join(tmp, 'apps');
let server: Served | undefined;

const EXTRA_APP = (title: string) => `application: v1
name: extra
version: "1.0"
title: ${title}
authors: [tests]
description: An application from a second catalogue folder.
tool: { name: debian, version: "12" }
invocation: [echo, { type: var, vars: word }]
parameters:
  word: { type: text, title: Word, description: The word to print, optional: true, defaultValue: hello }
`;

// UCloud's `application: v2` with a Workflow: the user writes the job script.
const SCRIPTED_APP = `application: v2
name: scripted
version: "1"
software: { type: Container, image: "debian:12" }
parameters:
  wf: { type: Workflow, title: Job script }
invocation: ""
`;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute jobs against a server', () => {
  before(async () => {
    mkdirSync(extraApps);
    writeFileSync(join(extraApps, 'extra.yml'), EXTRA_APP('Extra one'));
    writeFileSync(join(extraApps, 'scripted.yml'), SCRIPTED_APP);
    server = await startServe(mkdtempSync(join(tmp, 'data-')), {
      env: childEnv,
      args: ['--apps', join(ROOT, 'examples', 'apps'), '--apps', extraApps],
      // mpi-hello runs as root: with a configuration, the operator says so.
      config: 'dry:\n  runForMs: null\nsecurity:\n  allowRootApps: true\n',
    });
    putFile(server, '/home/local/a.txt');
    putFile(server, '/projects/optics/a.txt');
  });

  after(async () => {
    await stopServe(server);
    rmSync(tmp, { recursive: true, force: true });
  });

  const on = () => ['--url', server!.url, '--data-dir', server!.dataDir];
  const cli = (args: string[]) => runCliHere([...args, ...on()], { env: childEnv });

  async function submit(args: string[] = [], input = '/home/local/a.txt'): Promise<string> {
    const result = await cli(['run', 'word-count', '--param', `input=${input}`, ...args]);
    assertExit(result, 0);
    return result.stdout.trim();
  }

  async function retrieve(id: string): Promise<Job> {
    const result = await cli(['show', id, '--json']);
    assertExit(result, 0);
    return JSON.parse(result.stdout) as Job;
  }

  /** The job once it is RUNNING. */
  const running = (id: string) => servedJobInState(server!, id, 'RUNNING', 60_000);

  describe('outcomes', () => {
    const job = (state: string, outcome?: Outcome, exitCode?: Record<string, number>) =>
      ({
        id: 'j',
        status: {
          state,
          ...(exitCode ? { exitCode } : {}),
          ...(outcome ? { outcome: presentOutcome(outcome, exitCode) } : {}),
        },
        updates: [],
      }) as unknown as Job;
    const completed = (exitCode: Record<string, number>) => job('SUCCESS', { kind: 'COMPLETED' }, exitCode);

    test('a completed job names its non-zero ranks; the exit code is the highest, as srun gives', () => {
      assert.equal(outcomeOf(completed({ 0: 0, 1: 0 })), 'SUCCESS, completed (exit 0 on every rank)');
      assert.equal(commandExitCode(completed({ 0: 0, 1: 0 })), 0);
      assert.equal(outcomeOf(completed({ 0: 1 })), 'SUCCESS, completed (exit 1 on rank 0)');
      assert.equal(commandExitCode(completed({ 0: 1 })), 1);
      const mixed = { 0: 0, 1: 2, 2: 137, 3: 2 };
      assert.equal(failedRanks(mixed), 'exit 2 on ranks 1, 3, exit 137 on rank 2');
      assert.equal(commandExitCode(completed(mixed)), 137);
      // Codes a process cannot exit with still mean failure.
      assert.equal(commandExitCode(completed({ 0: 256 })), 1);
      assert.equal(commandExitCode(completed({ 0: -1 })), 1);
    });

    test('every way the platform ends a job has its own exit code, whatever the ranks exited with', () => {
      const ends: [string, Outcome, string, number][] = [
        ['SUCCESS', { kind: 'CANCELLED', by: 'alice' }, 'SUCCESS, cancelled by alice', 130],
        ['SUCCESS', { kind: 'OUT_OF_CREDITS' }, 'SUCCESS, stopped: out of credits', 122],
        ['EXPIRED', { kind: 'EXPIRED' }, 'EXPIRED, expired: its time allocation ran out', 124],
        [
          'SUCCESS',
          { kind: 'NEVER_STARTED', reason: 'cancelled', by: 'bob' },
          'SUCCESS, never started (cancelled by bob)',
          123,
        ],
        ['FAILURE', { kind: 'FAILED', reason: 'OOM-killed' }, 'FAILURE, failed (OOM-killed)', 125],
      ];
      for (const [state, outcome, text, code] of ends) {
        const ended = job(state, outcome, { 0: 0 });
        assert.equal(outcomeOf(ended), text);
        assert.equal(commandExitCode(ended), code, text);
        assert.equal(OUTCOME_EXIT_CODES[outcome.kind as Exclude<OutcomeKind, 'COMPLETED'>], code);
      }
      assert.equal(new Set(Object.values(OUTCOME_EXIT_CODES)).size, 5, 'one code per outcome');
    });

    test('a job that has not ended has no outcome: its state alone, and exit code 1', () => {
      assert.equal(outcomeOf(job('RUNNING')), 'RUNNING');
      assert.equal(commandExitCode(job('RUNNING')), 1);
    });
  });

  describe('job id prefixes', TIMEOUT, () => {
    test('show, logs, extend and cancel take a unique prefix; an ambiguous one lists the candidates', async () => {
      const first = await submit(['--time', '1h']);
      const second = await submit(['--time', '1h']);
      await running(first);
      await running(second);
      let common = 0;
      while (first[common] === second[common]) common++;
      const unique = first.slice(0, common + 1);

      const show = await cli(['show', unique]);
      assertExit(show, 0);
      assert.match(show.stdout, new RegExp(`^id\\s+${first}$`, 'm'));
      const logs = await cli(['logs', unique]);
      assertExit(logs, 0);
      assert.match(logs.stdout, /^dry run, nothing executed/);
      const extend = await cli(['extend', unique, '1d']);
      assertExit(extend, 0);
      assert.match(extend.stdout, new RegExp(`^${first}: extended by 24h; time limit now 25h`));

      const ambiguous = await cli(['show', first.slice(0, common)]);
      assertExit(ambiguous, 2);
      assert.match(ambiguous.stderr, new RegExp(`is ambiguous: it matches .*${second}`));
      assert.match(ambiguous.stderr, new RegExp(first));

      const unknown = await cli(['show', `${first.slice(0, common)}zzzz`]);
      assertExit(unknown, 1);
      assert.match(unknown.stderr, /^error: job \w+ was not found$/m);
      const notAnId = await cli(['cancel', 'NOT-AN-ID']);
      assertExit(notAnId, 2);
      assert.match(notAnId.stderr, /"NOT-AN-ID" is not a job id/);

      const cancel = await cli(['cancel', unique, second]);
      assertExit(cancel, 0);
      assert.equal(cancel.stdout, `${first}: cancelled\n${second}: cancelled\n`);
    });
  });

  describe('jobs', TIMEOUT, () => {
    test('ELAPSED and LEFT for a running job; --project keeps only that workspace', async () => {
      assertExit(await cli(['admin', 'project', 'optics']), 0);
      assertExit(await cli(['admin', 'member', 'optics', 'local', '--role', 'PI']), 0);
      assertExit(
        await cli([
          'admin',
          'grant',
          '--project',
          'optics',
          '--category',
          'u1-standard',
          '--credits',
          '1000',
        ]),
        0,
      );
      const inProject = await submit(
        ['--time', '2h', '--project', 'optics', '--name', 'in-optics'],
        '/projects/optics/a.txt',
      );
      const own = await submit(['--name', 'own']);
      await running(inProject);

      const list = await cli(['jobs', '--state', 'running']);
      assertExit(list, 0);
      assert.match(list.stdout, /^ID\s+APP\s+STATE\s+CREATED\s+ELAPSED\s+LEFT\s+NAME\s+OWNER\s+STATUS$/m);
      // Running for seconds, with a little under two hours left.
      assert.match(
        list.stdout,
        new RegExp(
          `^${inProject}\\s.*RUNNING\\s+\\S+ \\S+\\s+\\d+s\\s+1h5\\dm\\s+in-optics\\s+local in optics`,
          'm',
        ),
      );

      const filtered = await cli(['jobs', '--project', 'optics']);
      assertExit(filtered, 0);
      assert.match(filtered.stdout, new RegExp(`^${inProject}\\s`, 'm'));
      assert.doesNotMatch(filtered.stdout, new RegExp(own));
      assertExit(await cli(['cancel', inProject, own]), 0);
    });

    test('--watch redraws when a job changes and ends on Ctrl-C with exit 0', async () => {
      const id = await submit();
      await running(id);
      const child = spawn(process.execPath, [BIN, 'jobs', '--watch', '--limit', '5', ...on()], {
        cwd: ROOT,
        env: childEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const seen = (pattern: RegExp) =>
        until(() => pattern.test(out), { describe: `the watch shows ${pattern}`, timeout: 60_000 });
      try {
        await seen(new RegExp(`^${id}\\s.*RUNNING`, 'm'));
        assertExit(await cli(['cancel', id]), 0);
        await seen(new RegExp(`^${id}\\s.*SUCCESS`, 'm'));
        child.kill('SIGINT');
        assert.equal(await exited, 0);
      } finally {
        child.kill('SIGKILL');
      }
      // Each drawing starts with its time; the watch drew at least twice.
      assert.ok((out.match(/^ID\s+APP/gm) ?? []).length >= 2, out);
    });

    test('logs --rank prints one rank without prefixes; a rank the job lacks is refused', async () => {
      const result = await cli([
        'run',
        'mpi-hello',
        '--product',
        'u1-standard-2',
        '--replicas',
        '2',
        '--param',
        'slots=2',
        '--param',
        'command=echo hi',
      ]);
      assertExit(result, 0);
      const id = result.stdout.trim();
      await running(id);
      const all = await cli(['logs', id]);
      assertExit(all, 0);
      assert.match(all.stdout, /^\[0\] dry run/m);
      assert.match(all.stdout, /^\[1\] dry run/m);
      const one = await cli(['logs', id, '--rank', '1']);
      assertExit(one, 0);
      assert.equal(one.stdout.split('\n').filter(Boolean).length, 1);
      assert.match(one.stdout, /^dry run, nothing executed/);
      const json = await cli(['logs', id, '--rank', '1', '--json']);
      assertExit(json, 0);
      const ranks = json.stdout
        .trim()
        .split('\n')
        .flatMap((line) => (JSON.parse(line) as { log?: { rank: number }[] }).log ?? [])
        .map((chunk) => chunk.rank);
      assert.deepEqual(ranks, [1]);
      const missing = await cli(['logs', id, '--rank', '2']);
      assertExit(missing, 2);
      assert.match(missing.stderr, /^error: --rank: job \w+ has ranks 0 to 1$/m);
      const bad = await cli(['logs', id, '--rank', 'first']);
      assertExit(bad, 2);
      assert.match(bad.stderr, /^error: --rank: "first" must be a rank number/);
      assertExit(await cli(['cancel', id]), 0);
    });
  });

  describe('the command line', TIMEOUT, () => {
    test("a mistake in the options prints the command's usage, not the parser's text", async () => {
      const cases: [string[], string, string][] = [
        [['jobs', '--bogus'], 'error: unknown option --bogus', 'Usage: ucompute jobs'],
        [['jobs', '--limit'], 'error: --limit needs a value', 'Usage: ucompute jobs'],
        [['run', 'word-count', '--wait=yes'], 'error: --wait takes no value', 'Usage: ucompute run'],
        [['usage', '--since'], 'error: --since needs a value', 'Usage: ucompute usage'],
        [['admin', 'user', 'x', '-q'], 'error: unknown option -q', 'Usage: ucompute admin'],
      ];
      for (const [args, first, usage] of cases) {
        const result = await runCliHere(args, { env: childEnv });
        assertExit(result, 2);
        assert.equal(result.stderr.split('\n')[0], first, args.join(' '));
        assert.ok(result.stderr.includes(`\n\n${usage}`), result.stderr);
        assert.doesNotMatch(result.stderr, /positional|To specify/);
      }
    });

    test('apps show lists the parameters: name, type, mandatory, default and description', async () => {
      const result = await cli(['apps', 'show', 'word-count']);
      assertExit(result, 0);
      assert.match(result.stdout, /^word-count@1\.0: Word count$/m);
      assert.match(result.stdout, /^NAME\s+TYPE\s+MANDATORY\s+DEFAULT\s+DESCRIPTION$/m);
      assert.match(result.stdout, /^input\s+input_file\s+yes\s+-\s+\S/m);
      assert.match(result.stdout, /^top\s+integer \(1\.\.10000\)\s+no\s+10\s+\S/m);
      const unknown = await cli(['apps', 'show', 'nope']);
      assertExit(unknown, 2);
      assert.match(unknown.stderr, /there is no application nope/);
    });

    test('a Workflow parameter takes the job script inline or from a local file with @FILE', async () => {
      const scriptFile = join(tmp, 'job.j2');
      writeFileSync(scriptFile, 'echo "rank {{ ucloud.rank }}"\n');
      const fromFile = await cli(['run', 'scripted', '--param', `wf=@${scriptFile}`]);
      assertExit(fromFile, 0);
      const inline = await cli(['run', 'scripted', '--param', 'wf=echo inline']);
      assertExit(inline, 0);
      const jobs = [fromFile, inline].map((r) => r.stdout.trim());
      const scripts = await Promise.all(jobs.map((id) => retrieve(id)));
      assert.deepEqual(
        scripts.map((j) => j.specification.parameters?.wf),
        [
          { type: 'workflow', specification: { job: 'echo "rank {{ ucloud.rank }}"\n' } },
          { type: 'workflow', specification: { job: 'echo inline' } },
        ],
      );
      for (const id of jobs) assertExit(await cli(['cancel', id]), 0);

      const missing = await cli(['run', 'scripted', '--param', `wf=@${join(tmp, 'nope.j2')}`]);
      assertExit(missing, 2);
      assert.match(missing.stderr, /--param wf: cannot read the job script .*nope\.j2/);
    });

    test('completion scripts for bash and zsh offer the commands and each command’s options', async () => {
      const bash = await runCliHere(['completion', 'bash'], { env: childEnv });
      assertExit(bash, 0);
      const script = join(tmp, 'completion.bash');
      writeFileSync(script, bash.stdout);
      const complete = (...words: string[]) =>
        execFileSync(
          'bash',
          [
            '-c',
            `source "$0"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _ucompute; echo "\${COMPREPLY[@]}"`,
            script,
          ],
          { encoding: 'utf8' },
        ).trim();
      assert.equal(complete('ucompute', 'ad'), 'admin');
      assert.equal(complete('ucompute', 'sus'), 'suspend');
      assert.equal(complete('ucompute', 'resu'), 'resume');
      assert.equal(complete('ucompute', 'admin', 'gr'), 'grant grants');
      assert.equal(complete('ucompute', 'admin', 'rev'), 'revoke');
      assert.equal(complete('ucompute', 'jobs', '--w'), '--watch');
      assert.equal(complete('ucompute', 'logs', '--ra'), '--rank');
      assert.equal(complete('ucompute', 'usage', '--si'), '--since');

      const zsh = await runCliHere(['completion', 'zsh'], { env: childEnv });
      assertExit(zsh, 0);
      assert.match(zsh.stdout, /^#compdef ucompute$/m);
      assert.match(zsh.stdout, /^ {4}jobs\) candidates=\(.*--watch.*\) ;;$/m);
      const wrong = await runCliHere(['completion', 'fish'], { env: childEnv });
      assertExit(wrong, 2);
    });

    test('plan reads several --apps folders as one catalogue', async () => {
      const spec = join(tmp, 'extra.json');
      writeFileSync(
        spec,
        JSON.stringify({
          application: { name: 'extra', version: '1.0' },
          product: { id: 'u1-standard-1', category: 'u1-standard' },
        }),
      );
      const apps = ['--apps', join(ROOT, 'examples', 'apps'), '--apps', extraApps];
      const planned = await runCliHere(['plan', spec, ...apps, '--output', 'json'], { env: childEnv });
      assertExit(planned, 0);
      assert.match(planned.stdout, /"kind": "Job"/);
      const alone = await runCliHere(['plan', spec, '--output', 'json'], { env: childEnv });
      assertExit(alone, 2);
      assert.match(alone.stderr, /extra/);
    });

    test('several --apps folders make one catalogue, reloaded when a file changes; a broken change keeps the last', async () => {
      const title = async () => {
        const result = await cli(['apps', 'show', 'extra']);
        assertExit(result, 0);
        return result.stdout.split('\n')[0];
      };
      assert.equal(await title(), 'extra@1.0: Extra one');
      const file = join(extraApps, 'extra.yml');
      writeFileSync(file, EXTRA_APP('Extra two'));
      await until(async () => (await title()) === 'extra@1.0: Extra two', {
        describe: 'the changed app is served',
        timeout: 60_000,
        every: 200,
      });
      const listed = await cli(['apps']);
      assertExit(listed, 0);
      assert.match(listed.stdout, /^extra\s+1\.0\s+BATCH\s+Extra two$/m);

      const served = outputTail(server!.child);
      writeFileSync(file, `${readFileSync(file, 'utf8')}broken: [\n`);
      await until(() => served().includes('catalogue not reloaded'), {
        describe: 'the server refuses the broken change',
        timeout: 60_000,
      });
      assert.equal(await title(), 'extra@1.0: Extra two');
      const run = await cli(['run', 'extra']);
      assertExit(run, 0);
      assertExit(await cli(['cancel', run.stdout.trim()]), 0);
    });
  });
});
