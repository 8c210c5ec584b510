import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseDuration } from '../src/cli/format.ts';
import { parameterValue } from '../src/cli/run.ts';
import type { ApplicationParameter } from '../src/model/application.ts';
import type { Job, JobState } from '../src/model/job.ts';
import { assertExit, CHILD_ENV, runCli, runCliHere } from './support/cli.ts';
import { ROOT } from './support/paths.ts';
import { putFile, type Served, servedJobInState, startServe, stopServe } from './support/serve.ts';

/**
 * The real `ucompute` client commands against the real `ucompute serve`: the servers are child
 * processes, the commands run the CLI's main() in this process (what they print and answer is the
 * same; the process's own exit status is cli-exit-codes.test.ts's).
 */

/** A server's start is a child process: a few seconds at a load of 30. */
const TIMEOUT = { timeout: 600_000 };

// A developer's own ucompute settings must not reach the children either (CHILD_ENV drops the runner's).
const { UCOMPUTE_URL: _url, UCOMPUTE_TOKEN: _token, UCOMPUTE_DATA_DIR: _dataDir, ...childEnv } = CHILD_ENV;

type Server = Served;

const startServer = (dataDir: string, config?: string) =>
  startServe(dataDir, { env: childEnv, ...(config !== undefined ? { config } : {}) });
const stopServer = stopServe;

const cli = (args: string[], env = childEnv) => runCliHere(args, { env });

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-client-'));
let dry: Server | undefined; // jobs succeed at once
let held: Server | undefined; // jobs run until cancelled

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('the client commands against servers', () => {
  before(async () => {
    [dry, held] = await Promise.all([
      startServer(mkdtempSync(join(tmp, 'dry-'))),
      startServer(mkdtempSync(join(tmp, 'held-')), 'dry:\n  runForMs: null\n'),
    ]);
    for (const server of [dry, held]) {
      for (const input of ['/home/local/a.txt', '/home/local/books/a.txt']) putFile(server!, input);
    }
  });

  after(async () => {
    await Promise.all([stopServer(dry), stopServer(held)]);
    rmSync(tmp, { recursive: true, force: true });
  });

  const on = (server: Server | undefined) => ['--url', server!.url, '--data-dir', server!.dataDir];
  const client = (args: string[], server = dry) => cli([...args, ...on(server)]);

  async function retrieve(id: string, server = dry): Promise<Job> {
    const result = await client(['show', id, '--json'], server);
    assertExit(result, 0);
    return JSON.parse(result.stdout) as Job;
  }

  /** The job once it is in `state`. */
  const inState = (id: string, state: JobState, server = dry) => servedJobInState(server!, id, state);

  describe('parseDuration and parameterValue', () => {
    test('durations: d, h, m and s in that order, carried into larger units', () => {
      const cases: [string, [number, number, number]][] = [
        ['45s', [0, 0, 45]],
        ['90m', [1, 30, 0]],
        ['2h', [2, 0, 0]],
        ['1h30m', [1, 30, 0]],
        ['1h30m15s', [1, 30, 15]],
        ['3600s', [1, 0, 0]],
        ['0h5m', [0, 5, 0]],
        ['1d', [24, 0, 0]],
        ['2d1h30m', [49, 30, 0]],
      ];
      for (const [text, [hours, minutes, seconds]] of cases) {
        assert.deepEqual(parseDuration(text), { hours, minutes, seconds }, text);
      }
      for (const bad of ['', 'h', '5', '1m30h', '-5m', '1.5h', '0s', '1 h', '1h2d', 'd']) {
        assert.throws(() => parseDuration(bad, '--time'), { message: /^--time: / }, bad);
      }
    });

    const param = (p: Partial<ApplicationParameter> & Pick<ApplicationParameter, 'type'>) =>
      ({ name: 'x', optional: true, title: 'X', description: '', ...p }) as ApplicationParameter;

    test('values are typed by the parameter', () => {
      assert.deepEqual(parameterValue(param({ type: 'floating_point' }), '0.5'), {
        type: 'floating_point',
        value: 0.5,
      });
      assert.deepEqual(parameterValue(param({ type: 'boolean', trueValue: 'y', falseValue: 'n' }), 'YES'), {
        type: 'boolean',
        value: true,
      });
      assert.deepEqual(parameterValue(param({ type: 'textarea' }), 'a=b'), {
        type: 'textarea',
        value: 'a=b',
      });
      const options = [
        { name: 'Fast', value: 'fast-mode' },
        { name: 'Slow', value: 'slow-mode' },
      ];
      assert.deepEqual(parameterValue(param({ type: 'enumeration', options }), 'Slow'), {
        type: 'text',
        value: 'slow-mode',
      });
      assert.deepEqual(parameterValue(param({ type: 'enumeration', options }), 'fast-mode'), {
        type: 'text',
        value: 'fast-mode',
      });
      assert.throws(() => parameterValue(param({ type: 'enumeration', options }), 'medium'), {
        message: /^--param x: "medium" is not one of Fast \(fast-mode\), Slow \(slow-mode\)$/,
      });
      assert.deepEqual(parameterValue(param({ type: 'peer' }), 'db=abc123'), {
        type: 'peer',
        hostname: 'db',
        jobId: 'abc123',
      });
      assert.throws(() => parameterValue(param({ type: 'peer' }), 'abc123'), { message: /HOST=JOBID/ });
      assert.deepEqual(parameterValue(param({ type: 'input_directory' }), '/home/a/d'), {
        type: 'file',
        path: '/home/a/d',
      });
      assert.deepEqual(parameterValue(param({ type: 'license_server', tagged: [] }), 'lic'), {
        type: 'license_server',
        id: 'lic',
      });
      assert.throws(() => parameterValue(param({ type: 'integer' }), '1.5'), {
        message: /is not an integer/,
      });
      assert.throws(() => parameterValue(param({ type: 'floating_point' }), ''), {
        message: /is not a number/,
      });
      assert.deepEqual(parameterValue(param({ type: 'workflow' }), 'echo {{ x }}'), {
        type: 'workflow',
        specification: { job: 'echo {{ x }}' },
      });
    });
  });

  describe('help', () => {
    /** The commands that talk to a server: each one listed by `--help` and with a `--help` of its own. */
    const CLIENT_COMMANDS = [
      'apps',
      'products',
      'run',
      'jobs',
      'show',
      'logs',
      'cancel',
      'suspend',
      'resume',
      'extend',
      'ssh-keys',
    ];
    test('ucompute --help lists every command', async () => {
      // The one child process here: bin/ucompute.js runs main() and exits with its code.
      const result = await runCli(['--help'], { env: childEnv });
      assertExit(result, 0);
      for (const command of ['serve', 'plan', 'apps validate', ...CLIENT_COMMANDS]) {
        assert.match(result.stdout, new RegExp(`^  ${command}\\b`, 'm'), command);
      }
    });

    test('every client command has --help', async () => {
      for (const command of CLIENT_COMMANDS) {
        const result = await cli([command, '--help']);
        assertExit(result, 0);
        assert.match(result.stdout, new RegExp(`^Usage: ucompute ${command}`), command);
        assert.match(result.stdout, /--json/, command);
      }
    });

    test('apps validate still checks a folder locally', async () => {
      const result = await cli(['apps', 'validate', join(ROOT, 'examples', 'apps')]);
      assertExit(result, 0);
      assert.match(result.stdout, /all valid/);
    });
  });

  describe('catalogue and products', TIMEOUT, () => {
    test('apps prints a table of name, version, type and title', async () => {
      const result = await client(['apps']);
      assertExit(result, 0);
      assert.match(result.stdout, /^NAME\s+VERSION\s+TYPE\s+TITLE$/m);
      assert.match(result.stdout, /^word-count\s+1\.0\s+BATCH\s+Word count$/m);
      const json = JSON.parse((await client(['apps', '--json'])).stdout) as { items: { name: string }[] };
      assert.ok(json.items.some((a) => a.name === 'mpi-hello'));
    });

    test('products prints a table with prices per unit', async () => {
      const result = await client(['products']);
      assertExit(result, 0);
      assert.match(result.stdout, /^ID\s+CATEGORY\s+CPU\s+MEMORY\s+GPU\s+PRICE\/UNIT$/m);
      assert.match(result.stdout, /^u1-standard-1\s+u1-standard\s+1\s+2 GiB\s+0\s+1 per vCPU-minute$/m);
      assert.match(result.stdout, /^u1-gpu-1\s+u1-gpu\s+8\s+48 GiB\s+1\s+60 per GPU-hour$/m);
      const json = JSON.parse((await client(['products', '--json'])).stdout) as { items: { id: string }[] };
      assert.equal(json.items[0]?.id, 'u1-standard-1');
    });
  });

  describe('run, jobs, show, logs', TIMEOUT, () => {
    test('run turns --param, --file, --time and --name into the job specification', async () => {
      const result = await client([
        'run',
        'word-count',
        '--param',
        'top=5',
        '--param',
        'ignoreCase=no',
        '--file',
        'input=/home/local/books/a.txt:ro',
        '--time',
        '1h30m',
        '--name',
        'counting words',
        '--json',
      ]);
      assertExit(result, 0);
      const { responses } = JSON.parse(result.stdout) as { responses: { id: string }[] };
      assert.equal(responses.length, 1);
      const job = await retrieve(responses[0]!.id);
      const spec = job.specification;
      assert.deepEqual(spec.application, { name: 'word-count', version: '1.0' });
      assert.deepEqual(
        spec.product,
        { id: 'u1-standard-1', category: 'u1-standard', provider: 'ucompute' },
        'the first product, with the provider filled in as UCloud does',
      );
      assert.equal(spec.name, 'counting words');
      assert.deepEqual(spec.timeAllocation, { hours: 1, minutes: 30, seconds: 0 });
      assert.deepEqual(spec.parameters, {
        top: { type: 'integer', value: 5 },
        ignoreCase: { type: 'boolean', value: false },
        input: { type: 'file', path: '/home/local/books/a.txt', readOnly: true },
      });
    });

    test('run --mount adds folders of the drives as resources, read-only with :ro; a missing one is refused', async () => {
      const result = await client(['run', 'terminal', '--mount', '/home/local/books:ro', '--json']);
      assertExit(result, 0);
      const { responses } = JSON.parse(result.stdout) as { responses: { id: string }[] };
      const job = await retrieve(responses[0]!.id);
      assert.deepEqual(job.specification.resources, [
        { type: 'file', path: '/home/local/books', readOnly: true },
      ]);
      const missing = await client(['run', 'terminal', '--mount', '/home/local/nowhere']);
      assertExit(missing, 2);
      assert.match(missing.stderr, /specification\.resources\[0\]: \/home\/local\/nowhere does not exist/);
      const relative = await client(['run', 'terminal', '--mount', 'books']);
      assertExit(relative, 2);
      assert.match(relative.stderr, /--mount books: must be a storage path/);
    });

    test('ssh-keys add, ls and rm keep the public keys that ssh jobs accept', async () => {
      const file = join(tmp, 'id_test.pub');
      writeFileSync(
        file,
        'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEQYatw2D5RU4Utj9aV548x+iCaeZxJeMEqMy8Wh+fJ1 laptop@home\n',
      );
      const added = await client(['ssh-keys', 'add', file]);
      assertExit(added, 0);
      const [id, title] = added.stdout.trim().split(/\s{2,}/);
      assert.equal(title, 'laptop@home', 'the title is the key comment');
      const listed = await client(['ssh-keys', 'ls']);
      assertExit(listed, 0);
      assert.match(listed.stdout, /^ID\s+TITLE\s+FINGERPRINT\s+ADDED$/m);
      assert.match(listed.stdout, new RegExp(`^${id}\\s+laptop@home\\s+SHA256:\\S+\\s+\\d{4}-`, 'm'));
      const bad = await client(['ssh-keys', 'add', join(tmp, 'missing.pub')]);
      assertExit(bad, 2);
      assert.match(bad.stderr, /missing\.pub: no such file/);
      const removed = await client(['ssh-keys', 'rm', id!.slice(0, 6)]);
      assertExit(removed, 0);
      assert.equal(removed.stdout, `${id}: removed\n`);
      assert.match((await client(['ssh-keys', 'ls'])).stdout, /no SSH keys yet/);
    });

    test('run APP@VERSION with --product and --replicas; logs prefix each rank', async () => {
      const result = await client([
        'run',
        'mpi-hello@1.0',
        '--product',
        'u1-standard-2',
        '--replicas',
        '2',
        '--param',
        'slots=2',
        '--param',
        'command=echo hi',
        '--wait',
      ]);
      assertExit(result, 0);
      const [id, final] = result.stdout.trim().split('\n');
      assert.match(final!, new RegExp(`^${id}: SUCCESS`));
      const job = await retrieve(id!);
      assert.equal(job.specification.replicas, 2);
      assert.deepEqual(job.specification.product, {
        id: 'u1-standard-2',
        category: 'u1-standard',
        provider: 'ucompute',
      });
      assert.deepEqual(job.specification.parameters?.command, { type: 'text', value: 'echo hi' });

      const logs = await client(['logs', id!]);
      assertExit(logs, 0);
      assert.match(logs.stdout, /^\[0\] dry run, nothing executed/m);
      assert.match(logs.stdout, /^\[1\] dry run, nothing executed/m);
    });

    test('--wait reaches SUCCESS; jobs lists the job; show and logs describe it', async () => {
      const result = await client(['run', 'word-count', '--param', 'input=/home/local/a.txt', '--wait']);
      assertExit(result, 0);
      const [id, final] = result.stdout.trim().split('\n');
      assert.match(id!, /^[a-z0-9]+$/);
      assert.match(final!, /: SUCCESS, completed \(exit 0\)$/);

      const jobs = await client(['jobs']);
      assertExit(jobs, 0);
      assert.match(jobs.stdout, /^ID\s+APP\s+STATE\s+CREATED\s+ELAPSED\s+LEFT\s+NAME\s+OWNER\s+STATUS$/m);
      assert.match(
        jobs.stdout,
        new RegExp(
          `^${id}\\s+word-count@1\\.0\\s+SUCCESS, completed \\(exit 0\\)\\s+\\d{4}-\\d\\d-\\d\\d`,
          'm',
        ),
      );
      const filtered = await client([
        'jobs',
        '--state',
        'SUCCESS',
        '--app',
        'word-count',
        '--limit',
        '300',
        '--json',
      ]);
      assertExit(filtered, 0);
      const page = JSON.parse(filtered.stdout) as { items: Job[] };
      assert.ok(page.items.some((j) => j.id === id));
      assert.ok(page.items.every((j) => j.status.state === 'SUCCESS'));
      // The mount test above ran a terminal: the filter keeps it and leaves this word-count out.
      const terminals = JSON.parse((await client(['jobs', '--app', 'terminal', '--json'])).stdout) as {
        items: Job[];
      };
      assert.ok(terminals.items.every((j) => j.specification.application.name === 'terminal'));
      assert.ok(!terminals.items.some((j) => j.id === id));
      const limited = JSON.parse((await client(['jobs', '--limit', '1', '--json'])).stdout) as {
        items: Job[];
      };
      assert.equal(limited.items.length, 1);

      const show = await client(['show', id!]);
      assertExit(show, 0);
      assert.match(show.stdout, /^state\s+SUCCESS$/m);
      assert.match(show.stdout, /^exit codes\s+rank 0: 0$/m);
      assert.match(show.stdout, /^output folder\s+\/home\/local\/Jobs\/Word count\//m);
      assert.match(show.stdout, /^credits\s+\d+ charged/m);
      assert.match(show.stdout, /^time limit\s+1h \(the tool's default\)$/m);
      assert.match(show.stdout, /^expires\s+\d{4}-/m);
      assert.match(show.stdout, /^updates:\n.*IN_QUEUE: The job is in the queue$/m);

      const logs = await client(['logs', id!]);
      assertExit(logs, 0);
      assert.match(logs.stdout, /^dry run, nothing executed: \["sh","-c"/);
      const followed = await client(['logs', id!, '-f']);
      assertExit(followed, 0);
      assert.match(followed.stdout, /^dry run, nothing executed/);
      assert.match(followed.stderr, /: SUCCESS/);
    });

    test('run --follow streams the logs and updates until the job ends', async () => {
      const result = await client(['run', 'word-count', '--param', 'input=/home/local/a.txt', '--follow']);
      assertExit(result, 0);
      assert.match(result.stdout, /^[a-z0-9]+\ndry run, nothing executed/);
      assert.match(result.stderr, /RUNNING: The job is running/);
      assert.match(result.stderr, /: SUCCESS, completed \(exit 0\)$/m);

      const json = await client([
        'run',
        'word-count',
        '--param',
        'input=/home/local/a.txt',
        '--follow',
        '--json',
      ]);
      assertExit(json, 0);
      const lines = json.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.ok(Array.isArray((lines[0] as { responses?: unknown }).responses), 'the submission first');
      const messages = lines.slice(1) as { updates: { state?: string }[]; log: { stdout?: string }[] }[];
      assert.ok(messages.some((m) => m.updates.some((u) => u.state === 'SUCCESS')));
      assert.ok(messages.some((m) => m.log.some((c) => c.stdout?.startsWith('dry run'))));
    });
  });

  describe('extend and cancel', TIMEOUT, () => {
    test('extend adds time to a running job, cancel stops it, and an ended job refuses both', async () => {
      const run = await client(
        ['run', 'word-count', '--param', 'input=/home/local/a.txt', '--time', '1h'],
        held,
      );
      assertExit(run, 0);
      const id = run.stdout.trim();
      const running = await inState(id, 'RUNNING', held);

      const extend = await client(['extend', id, '30m'], held);
      assertExit(extend, 0);
      assert.match(extend.stdout, new RegExp(`^${id}: extended by 30m; time limit now 1h30m, expires `));
      const extended = await retrieve(id, held);
      assert.equal(extended.status.expiresAt, running.status.expiresAt! + 30 * 60_000);
      assert.equal(extended.updates.at(-1)?.newTimeAllocation, 90 * 60_000);
      assert.match((await client(['show', id], held)).stdout, /^time limit\s+1h30m \(extended\)$/m);

      const cancel = await client(['cancel', id], held);
      assertExit(cancel, 0);
      assert.equal(cancel.stdout, `${id}: cancelled\n`);
      const ended = await retrieve(id, held);
      assert.equal(ended.status.state, 'SUCCESS');
      assert.equal(ended.updates.at(-1)?.status, 'The job was cancelled');

      const again = await client(['cancel', id], held);
      assertExit(again, 1);
      assert.match(again.stderr, new RegExp(`^error: job ${id} has already ended \\(SUCCESS\\)$`, 'm'));
      const late = await client(['extend', id, '1h'], held);
      assertExit(late, 1);
      assert.match(late.stderr, /has already ended/);
    });

    test('suspend stops a running job and keeps it, resume queues it again; refusals say why', async () => {
      const run = await client(['run', 'word-count', '--param', 'input=/home/local/a.txt'], held);
      assertExit(run, 0);
      const id = run.stdout.trim();
      await inState(id, 'RUNNING', held);

      const suspend = await client(['suspend', id.slice(0, 8)], held);
      assertExit(suspend, 0);
      const suspendedWord =
        'Suspended by local: its processes are stopped; the job and its folder are kept until it is resumed';
      assert.equal(suspend.stdout, `${id}: SUSPENDED, ${suspendedWord}\n`);
      assert.match(
        (await client(['jobs'], held)).stdout,
        new RegExp(`^${id}\\s+word-count@\\S+\\s+SUSPENDED\\s.*\\s${suspendedWord}$`, 'm'),
      );
      const twice = await client(['suspend', id], held);
      assertExit(twice, 1);
      assert.match(
        twice.stderr,
        new RegExp(`^error: job ${id} is SUSPENDED; only queued or running jobs can be suspended$`, 'm'),
      );

      const resume = await client(['resume', id], held);
      assertExit(resume, 0);
      assert.match(resume.stdout, new RegExp(`^${id}: (IN_QUEUE|RUNNING), `));
      const resumed = await retrieve(id, held);
      assert.ok(resumed.updates.some((u) => u.status === 'Resumed by local: the job is in the queue again'));
      await inState(id, 'RUNNING', held);
      const notSuspended = await client(['resume', id], held);
      assertExit(notSuspended, 1);
      assert.match(notSuspended.stderr, new RegExp(`^error: job ${id} is RUNNING, not SUSPENDED$`, 'm'));
      assertExit(await client(['cancel', id], held), 0);
    });

    test('logs -f follows a running job until it is cancelled', async () => {
      const run = await client(['run', 'word-count', '--param', 'input=/home/local/a.txt'], held);
      assertExit(run, 0);
      const id = run.stdout.trim();
      await inState(id, 'RUNNING', held);
      const waiting = client(['logs', id, '-f'], held);
      assertExit(await client(['cancel', id], held), 0);
      const followed = await waiting;
      // A cancelled job ends as SUCCESS in UCloud's model; its outcome gives the exit code (README).
      assertExit(followed, 130);
      assert.match(followed.stderr, /SUCCESS, cancelled by local/);
    });
  });

  describe('errors a person can act on', TIMEOUT, () => {
    const wordCount = ['run', 'word-count', '--param', 'input=/home/local/a.txt'];
    const cases: [string, string[], RegExp][] = [
      [
        'a --param that is not an integer',
        [...wordCount, '--param', 'top=many'],
        /^error: --param top: "many"/,
      ],
      [
        'a --param the app lacks',
        [...wordCount, '--param', 'colour=red'],
        /^error: --param colour: .*no parameter colour/,
      ],
      ['a --param without =', [...wordCount, '--param', 'top'], /^error: --param top: must be NAME=VALUE/],
      [
        'a bad boolean',
        [...wordCount, '--param', 'ignoreCase=maybe'],
        /^error: --param ignoreCase: .*true, false, yes or no/,
      ],
      [
        'a value out of range (the service says)',
        [...wordCount, '--param', 'top=0'],
        /^error: items\[0\]\.specification\.parameters\.top\.value: must be >= 1$/m,
      ],
      [
        'a file outside the drives',
        ['run', 'word-count', '--file', 'input=/etc/passwd'],
        /^error: items\[0\]\.specification\.parameters\.input\.path: must lie inside/m,
      ],
      [
        'a relative file',
        ['run', 'word-count', '--file', 'input=a.txt'],
        /^error: --file input: "a.txt" must be a storage path/,
      ],
      [
        'a bad --time',
        [...wordCount, '--time', '90 minutes'],
        /^error: --time: "90 minutes" is not a duration/,
      ],
      ['a zero --time', [...wordCount, '--time', '0m'], /^error: --time: "0m" must be longer than zero/],
      ['an unknown app', ['run', 'no-such-app'], /^error: application: there is no application no-such-app/],
      [
        'an unknown version',
        ['run', 'word-count@9.9'],
        /^error: application: word-count has no version 9\.9 \(its versions: 1\.0\)/,
      ],
      ['an unknown product', [...wordCount, '--product', 'u9'], /^error: --product: there is no product u9/],
      ['bad --replicas', [...wordCount, '--replicas', 'two'], /^error: --replicas: "two"/],
      ['a bad extend duration', ['extend', 'abc', 'soon'], /^error: DURATION: "soon" is not a duration/],
      ['a bad --state', ['jobs', '--state', 'DONE'], /^error: --state: "DONE" is not one of IN_QUEUE/],
      [
        'an outcome as --state',
        ['jobs', '--state', 'cancelled'],
        /is not one of IN_QUEUE.*; for how jobs ended: --outcome cancelled$/m,
      ],
    ];
    for (const [name, args, message] of cases) {
      test(`${name}: exit 2 naming the field`, async () => {
        const result = await client(args);
        assertExit(result, 2);
        assert.match(result.stderr, message);
      });
    }

    test('an unknown job: exit 1 with the service message', async () => {
      for (const command of ['show', 'logs']) {
        const result = await client([command, 'nosuchjob']);
        assertExit(result, 1);
        assert.equal(result.stderr, 'error: job nosuchjob was not found\n');
      }
    });

    test('no server: exit 1, "cannot reach"', async () => {
      // A port that was free a moment ago: nothing listens there.
      const probe = createServer();
      await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
      const port = (probe.address() as { port: number }).port;
      await new Promise((resolve) => probe.close(resolve));
      const url = `http://127.0.0.1:${port}`;
      for (const args of [['jobs'], ['run', 'word-count'], ['logs', 'abc']]) {
        const result = await cli([...args, '--url', url, '--data-dir', tmp]);
        assertExit(result, 1);
        assert.equal(
          result.stderr,
          `error: cannot reach ucompute at ${url}: is \`ucompute serve\` running?\n`,
          args.join(' '),
        );
      }
    });

    test('a bad token: exit 1, "the token was refused"', async () => {
      for (const args of [['jobs'], ['apps'], ['logs', 'abc']]) {
        const result = await cli([...args, '--url', dry!.url, '--token', 'not-a-token']);
        assertExit(result, 1);
        assert.match(
          result.stderr,
          /^error: the token was refused \(set UCOMPUTE_TOKEN or --token\)$/m,
          args.join(' '),
        );
      }
      // The environment variables work too, and a missing token file is named.
      const result = await cli(['jobs'], {
        ...childEnv,
        UCOMPUTE_URL: dry!.url,
        UCOMPUTE_DATA_DIR: join(tmp, 'nowhere'),
      });
      assertExit(result, 1);
      assert.match(
        result.stderr,
        /the token was refused .*no token was found in .*nowhere\/admin\.token \(missing\)/,
      );
    });
  });
});
