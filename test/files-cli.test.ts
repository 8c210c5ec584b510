import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CHILD_ENV, runCliHere } from './support/cli.ts';
import { type Served, startServe, stopServe } from './support/serve.ts';

/**
 * `ucompute files ...` (the CLI's main() in this process) against a real `ucompute serve` (a child;
 * dry backend), as its admin user `local`.
 */

let served: Served | undefined;
let dir = '';
const files = (...args: string[]) =>
  runCliHere(['files', ...args], {
    env: { ...CHILD_ENV, UCOMPUTE_URL: served!.url, UCOMPUTE_DATA_DIR: served!.dataDir, UCOMPUTE_TOKEN: '' },
  });

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute files against a server', () => {
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ucompute-files-cli-'));
    served = await startServe(join(dir, 'data'));
  });
  after(async () => {
    await stopServe(served);
    await rm(dir, { recursive: true, force: true });
  });

  test('put, ls, cat, get, mv, cp and rm round a file through the drive', async () => {
    const local = join(dir, 'moby.txt');
    await writeFile(local, 'Call me Ishmael.\n');
    const put = await files('put', local, '/home/local/books/moby.txt');
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, '/home/local/books/moby.txt\n', 'the new folder books is made');
    const into = await files('put', local, '/home/local/books');
    assert.equal(into.stdout, '/home/local/books/moby.txt\n', 'a folder as PATH takes the local name');
    assert.equal((await files('mkdir', '/home/local/empty/inner')).code, 0);
    assert.match((await files('ls', '/home/local/empty')).stdout, /^inner\/\s+folder\s+-\s/m);
    const ls = await files('ls', '/home/local/books');
    assert.match(ls.stdout, /^NAME\s+TYPE\s+SIZE\s+MODIFIED\nmoby\.txt\s+file\s+17\s/);
    assert.equal((await files('cat', '/home/local/books/moby.txt')).stdout, 'Call me Ishmael.\n');
    assert.equal((await files('cp', '/home/local/books', '/home/local/copy')).code, 0);
    assert.equal((await files('mv', '/home/local/copy/moby.txt', '/home/local/copy/whale.txt')).code, 0);
    const got = await files('get', '/home/local/copy/whale.txt', dir);
    assert.equal(got.code, 0, got.stderr);
    assert.equal(await readFile(join(dir, 'whale.txt'), 'utf8'), 'Call me Ishmael.\n');
    const removed = await files('rm', '/home/local/copy/whale.txt');
    assert.equal(removed.stdout, '/home/local/copy/whale.txt -> /home/local/Trash/whale.txt\n');
    const gone = await files('cat', '/home/local/copy/whale.txt');
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /error: \/home\/local\/copy\/whale\.txt was not found/);
  });

  test('empty-trash deletes what rm put in the Trash for good, and says how much', async () => {
    const local = join(dir, 'bytes.txt');
    await writeFile(local, 'x'.repeat(2048));
    assert.equal((await files('put', local, '/home/local/tmp/bytes.txt')).code, 0);
    assert.equal((await files('rm', '/home/local/tmp')).code, 0);
    const emptied = await files('empty-trash', '/home/local');
    assert.equal(emptied.code, 0, emptied.stderr);
    assert.match(emptied.stdout, /^emptied the Trash of \/home\/local: \d+ entries, /);
    assert.equal((await files('ls', '/home/local/Trash')).stdout, 'NAME  TYPE  SIZE  MODIFIED\n');
    const notDrive = await files('empty-trash', '/home/local/Trash');
    assert.equal(notDrive.code, 2, 'a bad argument');
    assert.match(notDrive.stderr, /drive: \/home\/local\/Trash is not a drive/);
  });

  test('put into a folder that does not exist yet (PATH/) makes it and puts the file there, in one step', async () => {
    const local = join(dir, 'notes.txt');
    await writeFile(local, 'a note\n');
    const put = await files('put', local, '/home/local/fresh/data/');
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, '/home/local/fresh/data/notes.txt\n');
    assert.equal(
      await readFile(join(served!.dataDir, 'storage/home/local/fresh/data/notes.txt'), 'utf8'),
      'a note\n',
    );
  });

  test("with --project, relative paths are in the project's drive; without, they are refused before any transfer", async () => {
    const admin = (...args: string[]) =>
      runCliHere(['admin', ...args], {
        env: {
          ...CHILD_ENV,
          UCOMPUTE_URL: served!.url,
          UCOMPUTE_DATA_DIR: served!.dataDir,
          UCOMPUTE_TOKEN: '',
        },
      });
    assert.equal((await admin('project', 'lab')).code, 0);
    assert.equal((await admin('member', 'lab', 'local', '--role', 'PI')).code, 0);
    const local = join(dir, 'shared.txt');
    await writeFile(local, 'for the lab\n');
    const put = await files('put', '--project', 'lab', local, 'inputs/');
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, '/projects/lab/inputs/shared.txt\n');
    assert.equal((await files('cat', '--project', 'lab', 'inputs/shared.txt')).stdout, 'for the lab\n');
    const personal = await files('put', local, 'inputs/');
    assert.equal(personal.code, 2);
    assert.match(
      personal.stderr,
      /inputs\/: give a path in a drive, such as \/home\/<you>\/inputs\/ \(relative paths need --project\)/,
    );
    const stranger = await files('ls', '--project', 'elsewhere', '/home/local');
    assert.equal(stranger.code, 1);
    assert.match(stranger.stderr, /project elsewhere was not found/);
  });

  test('a large put shows its progress on stderr, and --resume continues broken transfers', async () => {
    const content = randomBytes(20 * 1024 * 1024);
    const local = join(dir, 'large.bin');
    await writeFile(local, content.subarray(0, 7 * 1024 * 1024));
    const first = await files('put', local, '/home/local/large.bin');
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stderr, '', 'small files go up without progress');
    await writeFile(local, content);
    const resumed = await files('put', '--resume', local, '/home/local/large.bin');
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stderr, /^put \/home\/local\/large\.bin: 35% \(7\.0 of 20\.0 MiB\)$/m);
    assert.match(resumed.stderr, /^put \/home\/local\/large\.bin: 100% \(20\.0 of 20\.0 MiB\)$/m);
    const copy = join(dir, 'copy.bin');
    await writeFile(copy, content);
    await truncate(copy, 5 * 1024 * 1024);
    assert.equal((await files('get', '--resume', '/home/local/large.bin', copy)).code, 0);
    assert.ok((await readFile(copy)).equals(content));
    assert.ok((await readFile(join(served!.dataDir, 'storage/home/local/large.bin'))).equals(content));
  });

  test('bad paths and usage mistakes are refused with the reason', async () => {
    const leaving = await files('cat', '/home/local/../../etc/passwd');
    assert.equal(leaving.code, 2);
    assert.match(leaving.stderr, /path: must be an absolute path without \. or \.\. segments/);
    const other = await files('ls', '/home/bob');
    assert.equal(other.code, 1);
    assert.match(other.stderr, /\/home\/bob was not found/);
    const usage = await files('mv', '/home/local/a');
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /files mv takes 2 arguments\n\nUsage: ucompute files COMMAND/);
  });

  test('usage shows what each drive holds against its quota; past the quota, put fails naming it', async () => {
    const usage = await files('usage');
    assert.equal(usage.code, 0, usage.stderr);
    assert.match(usage.stdout, /^DRIVE\s+OWNER\s+USED\s+QUOTA\s+USE\s+MEASURED$/m);
    assert.match(usage.stdout, /^\/home\/local\s+user:local\s+[\d.]+ [KMG]?i?B\s+100\.0 GiB\s+0%\s+\d{4}-/m);

    await mkdir(join(dir, 'small'));
    const small = await startServe(join(dir, 'small'), {
      config: 'storage: { quota: { defaultBytes: 65536 } }\n',
    });
    try {
      const filesOfSmall = (...args: string[]) =>
        runCliHere(['files', ...args], {
          env: {
            ...CHILD_ENV,
            UCOMPUTE_URL: small.url,
            UCOMPUTE_DATA_DIR: small.dataDir,
            UCOMPUTE_TOKEN: '',
          },
        });
      const local = join(dir, 'big.bin');
      await writeFile(local, Buffer.alloc(100_000));
      const put = await filesOfSmall('put', local, '/home/local/big.bin');
      assert.equal(put.code, 1, put.stdout);
      assert.match(
        put.stderr,
        /would pass the storage quota of user local: \/home\/local .* of its 64\.0 KiB/,
      );
      const json = JSON.parse((await filesOfSmall('usage', '--json')).stdout);
      assert.equal(json[0].quotaBytes, 65536);
      assert.ok(json[0].usedBytes < 65536, 'the refused upload is not counted');
    } finally {
      await stopServe(small);
    }
  });
});
