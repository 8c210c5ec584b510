import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { after, before, test } from 'node:test';
import { exampleImages, useExampleImages } from './support/example-images.ts';
import { openTestService } from './support/local-backend.ts';
import { needs } from './support/local-tools.ts';

/**
 * Every example app runs in the README's images (examples/images/*.yml, built with mmdebstrap),
 * never on the host userland view (`hostUserland: false`): MPI across 2 and 4 replicas over the ssh
 * plugin's keys in /root/.ssh (a private folder of the image), a peer fetching from a file server,
 * the interactive ones answering their protocol. One service (one local backend) for the file: the
 * tests' jobs run side by side in it, as users' jobs do.
 */

const tools = await needs('bwrap', 'nft', 'ip', 'mmdebstrap', 'skopeo', 'umoci');
const alice = { username: 'alice', admin: false };
const product = { id: 'u1-standard-1', category: 'u1-standard' };

/** What the file's set-up leaves to undo: the service's and the backend's after hooks, its folder. */
const cleanups: (() => Promise<void>)[] = [];
let dir: string | undefined;
after(async () => {
  // In the order they were added, as node:test runs a test's own after hooks.
  for (const cleanup of cleanups) await cleanup();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

/** What the file's tests run in: every image they use, one service over one local backend. */
async function setup() {
  await exampleImages(['busybox', 'openmpi', 'debian', 'python', 'desktop', 'jupyter', 'ssh-server']);
  dir = await mkdtemp(join(tmpdir(), 'ucompute-example-images-'));
  await useExampleImages(dir);
  const opened = await openTestService(
    { after: (fn) => void cleanups.push(fn) },
    { dir, config: { hostUserland: false, capacity: { cpu: 16, memoryInGigs: 32 } }, requireCredits: false },
  );
  await opened.store.users.createUser('alice', false);
  const { store, service } = opened;
  const ended = async (id: string, ms = 120_000) => {
    for (let i = 0; i < ms / 50; i++) {
      const job = (await store.jobs.get(id))!;
      if (['SUCCESS', 'FAILURE', 'EXPIRED'].includes(job.state)) return job;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`job ${id} did not end: ${JSON.stringify(await store.jobs.updatesOf(id))}`);
  };
  const running = async (id: string, ms = 60_000) => {
    for (let i = 0; i < ms / 50 && (await store.jobs.get(id))!.state !== 'RUNNING'; i++) {
      assert.ok(
        !['SUCCESS', 'FAILURE'].includes((await store.jobs.get(id))!.state),
        JSON.stringify(await store.jobs.updatesOf(id)),
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(
      (await store.jobs.get(id))!.state,
      'RUNNING',
      JSON.stringify(await store.jobs.updatesOf(id)),
    );
  };
  const submit = async (spec: { application: { name: string; version: string } } & Record<string, unknown>) =>
    (await service.create(alice, [{ product, ...spec }]))[0]!;
  /** What rank 0 printed on one stream. */
  const printed = async (id: string, stream: 'stdout' | 'stderr') => {
    let text = '';
    for await (const chunk of opened.backend.logs(id, { follow: false }))
      if (chunk.rank === 0) text += chunk[stream] ?? '';
    return text;
  };
  const stdout = (id: string) => printed(id, 'stdout');
  /**
   * The job ended with every rank's exit code 0. SUCCESS alone says the platform ran it to the
   * end, whatever the application's exit code: a check of the state alone passed with exit 1.
   */
  const succeeded = async (id: string) => {
    const job = await ended(id);
    const why = async () =>
      `${JSON.stringify(await store.jobs.updatesOf(id))}\nrank 0's stderr: ${await printed(id, 'stderr')}`;
    assert.equal(job.state, 'SUCCESS', await why());
    const codes = Object.values(job.exitCodes ?? {});
    assert.ok(
      codes.length > 0 && codes.every((code) => code === 0),
      `exit codes ${JSON.stringify(job.exitCodes)}: ${await why()}`,
    );
    return job;
  };
  /** What the job's port answers first to `hello` (nothing: the first bytes it sends). */
  const answer = async (id: string, port: number, hello?: string) => {
    let last: unknown;
    for (let attempt = 0; attempt < 120; attempt++) {
      try {
        const socket: Duplex = await opened.backend.connect(id, 0, port);
        if (hello !== undefined) socket.write(hello);
        const [first] = (await socket.take(1).toArray()) as Buffer[];
        socket.destroy();
        if (first) return first.toString('latin1');
      } catch (error) {
        last = error;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.fail(`port ${port} of job ${id} never answered: ${String(last)}`);
  };
  return { ...opened, ended, running, submit, stdout, succeeded, answer };
}

let shared: Awaited<ReturnType<typeof setup>>;
if (tools.skip === undefined)
  before(
    async () => {
      shared = await setup();
    },
    { timeout: 60 * 60_000 },
  );

for (const replicas of [2, 4]) {
  test(`mpi-hello runs across ${replicas} replicas of the openmpi image`, tools, async () => {
    const { submit, succeeded, stdout } = shared;
    const id = await submit({ application: { name: 'mpi-hello', version: '1.0' }, replicas });
    const job = await succeeded(id);
    assert.deepEqual(job.exitCodes, Object.fromEntries(Array.from({ length: replicas }, (_, r) => [r, 0])));
    const hellos = (await stdout(id)).split('\n').filter((l) => l.startsWith('hello from rank'));
    assert.equal(hellos.length, replicas, await stdout(id));
  });
}

test('word-count runs in the debian image on a file of the owner', tools, async () => {
  const { submit, succeeded, stdout, storageRoot } = shared;
  await mkdir(join(storageRoot, 'home/alice'), { recursive: true });
  await writeFile(join(storageRoot, 'home/alice/words.txt'), 'b a b c b a\n');
  const id = await submit({
    application: { name: 'word-count', version: '1.0' },
    parameters: {
      input: { type: 'file', path: '/home/alice/words.txt', readOnly: true },
      top: { type: 'integer', value: 1 },
    },
  });
  await succeeded(id);
  assert.equal((await stdout(id)).trim().replace(/ +/g, ' '), '3 b');
});

// The check is submitted as soon as the server is RUNNING, before it listens: http-check asks again
// until the peer answers (a researcher starts both at once).
test('http-check in the python image fetches from a file-server peer', tools, async () => {
  const { submit, succeeded, running, stdout, storageRoot } = shared;
  await mkdir(join(storageRoot, 'home/alice/site'), { recursive: true });
  await writeFile(join(storageRoot, 'home/alice/site/index.txt'), 'served from the image\n');
  const server = await submit({
    application: { name: 'file-server', version: '1.0' },
    parameters: { folder: { type: 'file', path: '/home/alice/site', readOnly: true } },
  });
  await running(server);
  const check = await submit({
    application: { name: 'http-check', version: '1.0' },
    parameters: {
      server: { type: 'peer', hostname: 'files', jobId: server },
      port: { type: 'integer', value: 8080 },
      path: { type: 'text', value: 'index.txt' },
    },
  });
  await succeeded(check);
  assert.match(await stdout(check), /served from the image/);
});

test('terminal, desktop, jupyter and ssh-server run in their images and answer', tools, async () => {
  const { submit, running, answer, backend } = shared;
  const terminal = await submit({ application: { name: 'terminal', version: '1.0' } });
  const desktop = await submit({ application: { name: 'desktop', version: '1.0' } });
  const jupyter = await submit({ application: { name: 'jupyter', version: '1.0' } });
  const ssh = await submit({ application: { name: 'ssh-server', version: '1.0' } });
  for (const id of [terminal, desktop, jupyter, ssh]) await running(id);
  const shell = await backend.shell(terminal, 0, { cols: 80, rows: 24 });
  shell.write('cat /etc/debian_version; exit\n');
  let text = '';
  for await (const chunk of shell) text += String(chunk);
  assert.match(text, /^12\.\d+/m);
  assert.match(await answer(desktop, 5900), /^RFB 003\.00\d/);
  assert.match(await answer(jupyter, 8888, 'GET /api HTTP/1.0\r\n\r\n'), /^HTTP\/1\.[01] 200/);
  assert.match(await answer(ssh, 22), /^SSH-2\.0-OpenSSH/);
});
