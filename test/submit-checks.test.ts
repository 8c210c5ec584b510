import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import type { LargestMachine } from '../src/jobs/backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { ValidationError } from '../src/model/errors.ts';
import { directoryStorage } from '../src/storage/directory.ts';
import { env } from './support/fixtures.ts';
import { jobCount, openTestStore } from './support/store.ts';

const alice = { username: 'alice', admin: false };
const STANDARD_2 = { id: 'u1-standard-2', category: 'u1-standard' };
const root = mkdtempSync(join(tmpdir(), 'ucompute-submit-checks-'));

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('checks at submit', () => {
  after(() => rmSync(root, { recursive: true, force: true }));

  mkdirSync(join(root, 'home/alice/books'), { recursive: true });
  mkdirSync(join(root, 'home/bob'), { recursive: true });
  writeFileSync(join(root, 'home/alice/books/moby.txt'), 'Call me Ishmael.\n');
  writeFileSync(join(root, 'home/bob/secret.txt'), 'not for alice\n');
  symlinkSync('../bob/secret.txt', join(root, 'home/alice/bobs-secret.txt'));
  symlinkSync('../bob', join(root, 'home/alice/bobs-home'));
  symlinkSync('books/moby.txt', join(root, 'home/alice/moby-link.txt'));

  const GiB = 2 ** 30;

  /** The dry backend, with the largest machine given (null: unknown, as the dry backend says). */
  async function service(machine: LargestMachine | null = null) {
    const store = await openTestStore();
    const jobs = createJobService({
      store,
      env: env(),
      backend: {
        ...dryBackend({ runForMs: null }),
        machines: () => ({ total: { cpu: 64, memory: 2 ** 40 }, largest: machine }),
      },
      inputs: directoryStorage(root),
      requireCredits: false,
    });
    const rows = () => jobCount(store);
    return { jobs, rows };
  }

  const wordCount = (input: string) => ({
    application: { name: 'word-count', version: '1.0' },
    product: STANDARD_2,
    parameters: { input: { type: 'file', path: input } },
  });
  const fileServer = (folder: string) => ({
    application: { name: 'file-server', version: '1.0' },
    product: STANDARD_2,
    parameters: { folder: { type: 'file', path: folder } },
  });

  /** The issues of the ValidationError `promise` rejects with. */
  async function issuesOf(promise: Promise<unknown>): Promise<string[]> {
    try {
      await promise;
    } catch (e) {
      assert.ok(e instanceof ValidationError, String(e));
      return e.issues.map((i) => `${i.path}: ${i.message}`);
    }
    assert.fail('the job was accepted');
  }

  describe('inputs are checked at submit', () => {
    test('a missing input file is refused naming its parameter, and nothing is created', async () => {
      const { jobs, rows } = await service();
      assert.deepEqual(await issuesOf(jobs.create(alice, [wordCount('/home/alice/books/missing.txt')])), [
        'items[0].specification.parameters.input: /home/alice/books/missing.txt does not exist',
      ]);
      assert.equal(await rows(), 0);
      assert.equal(existsSync(join(root, 'home/alice/books/missing.txt')), false);
    });

    test('a folder for a file parameter, and a file for a folder parameter, are refused', async () => {
      const { jobs } = await service();
      assert.deepEqual(await issuesOf(jobs.create(alice, [wordCount('/home/alice/books')])), [
        'items[0].specification.parameters.input: /home/alice/books is not a file (it is a folder)',
      ]);
      assert.deepEqual(await issuesOf(jobs.create(alice, [fileServer('/home/alice/books/moby.txt')])), [
        'items[0].specification.parameters.folder: /home/alice/books/moby.txt is not a folder (it is a file)',
      ]);
    });

    test("a symlink out of the owner's drive is refused; one inside it is followed", async () => {
      const { jobs, rows } = await service();
      assert.deepEqual(await issuesOf(jobs.create(alice, [wordCount('/home/alice/bobs-secret.txt')])), [
        'items[0].specification.parameters.input: /home/alice/bobs-secret.txt leads out of /home/alice through a link',
      ]);
      assert.deepEqual(await issuesOf(jobs.create(alice, [fileServer('/home/alice/bobs-home')])), [
        'items[0].specification.parameters.folder: /home/alice/bobs-home leads out of /home/alice through a link',
      ]);
      // A link halfway down the path leads out as well as one at its end.
      assert.deepEqual(await issuesOf(jobs.create(alice, [wordCount('/home/alice/bobs-home/secret.txt')])), [
        'items[0].specification.parameters.input: /home/alice/bobs-home/secret.txt leads out of /home/alice through a link',
      ]);
      assert.equal(await rows(), 0);
      assert.equal((await jobs.create(alice, [wordCount('/home/alice/moby-link.txt')])).length, 1);
    });

    test('existing inputs of the right kind are accepted; every bad item of a request is named', async () => {
      const { jobs, rows } = await service();
      assert.equal((await jobs.create(alice, [wordCount('/home/alice/books/moby.txt')])).length, 1);
      assert.equal((await jobs.create(alice, [fileServer('/home/alice/books')])).length, 1);
      assert.equal(await rows(), 2);
      const issues = await issuesOf(
        jobs.create(alice, [wordCount('/home/alice/books/moby.txt'), wordCount('/home/alice/nothing')]),
      );
      assert.deepEqual(issues, [
        'items[1].specification.parameters.input: /home/alice/nothing does not exist',
      ]);
      assert.equal(await rows(), 2);
    });
  });

  const mpi = (product: string, replicas: number) => ({
    application: { name: 'mpi-hello', version: '1.0' },
    product: { id: product, category: 'u1-standard' },
    replicas,
  });

  describe('a job that fits no machine is refused at submit', () => {
    const twoCpus = { cpuMillis: 2000, memoryBytes: 8 * GiB };

    test('one replica larger than the largest machine, with the reason; nothing is stored', async () => {
      const { jobs, rows } = await service({ ...twoCpus, holdsEveryReplica: false });
      assert.deepEqual(await issuesOf(jobs.create(alice, [mpi('u1-standard-8', 1)])), [
        'items[0].specification.product: u1-standard-8 needs 8 CPUs per replica; the largest machine here has 2 CPUs',
        'items[0].specification.product: u1-standard-8 needs 32 GiB of memory per replica; the largest machine here has 8 GiB of memory',
      ]);
      assert.equal(await rows(), 0);
    });

    test('where replicas share one machine they must fit it together; elsewhere each on its own', async () => {
      const local = service({ ...twoCpus, holdsEveryReplica: true });
      assert.deepEqual(await issuesOf((await local).jobs.create(alice, [mpi('u1-standard-1', 3)])), [
        'items[0].specification.replicas: 3 replicas of u1-standard-1 need 3 CPUs together on the one machine here, which has 2 CPUs',
      ]);
      assert.equal((await (await local).jobs.create(alice, [mpi('u1-standard-1', 2)])).length, 1);
      const cluster = service({ ...twoCpus, holdsEveryReplica: false });
      assert.equal((await (await cluster).jobs.create(alice, [mpi('u1-standard-1', 3)])).length, 1);
    });

    test('an unknown largest machine refuses nothing', async () => {
      const { jobs } = await service(null);
      assert.equal((await jobs.create(alice, [mpi('u1-standard-8', 1)])).length, 1);
    });
  });
});
