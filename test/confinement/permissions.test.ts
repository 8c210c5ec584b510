import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openTestBackend } from '../support/local-backend.ts';
import { needs } from '../support/local-tools.ts';
import { serving, spawnServe } from '../support/serve.ts';
import { shellTask, vcjob } from '../support/vcjob.ts';

const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

async function serveOnce(t: { after(fn: () => Promise<void>): void }, dataDir: string) {
  const child = spawnServe(['--data-dir', dataDir]);
  t.after(async () => {
    child.kill('SIGTERM');
    if (child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve));
  });
  await serving(child);
}

test('the data folder is 0700, the database and the admin token 0600, from their creation', async (t) => {
  const parent = await mkdtemp(join(tmpdir(), 'ucompute-perms-'));
  t.after(() => rm(parent, { recursive: true, force: true }));
  const dataDir = join(parent, 'data');
  await serveOnce(t, dataDir);
  assert.equal(await modeOf(dataDir), 0o700);
  assert.equal(await modeOf(join(dataDir, 'ucompute.db')), 0o600);
  assert.equal(await modeOf(join(dataDir, 'ucompute.db-wal')), 0o600);
  assert.equal(await modeOf(join(dataDir, 'admin.token')), 0o600);
});

test('a data folder an earlier version left open to others is closed', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'ucompute-perms-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await chmod(dataDir, 0o755);
  await serveOnce(t, dataDir);
  assert.equal(await modeOf(dataDir), 0o700);
});

test(
  "the local backend's job state and pod state are private",
  await needs('bwrap', 'nft', 'ip'),
  async (t) => {
    const home = await mkdtemp(join(tmpdir(), 'ucompute-perms-'));
    await mkdir(join(home, 'local'));
    const { close } = await openTestBackend(t, { dir: home });
    // Passable by others (x), not listable: the sandbox binds a job's files by path as the
    // containers' unprivileged host users.
    assert.equal(await modeOf(home), 0o711);
    assert.equal(await modeOf(join(home, 'local', 'jobs')), 0o711);
    assert.equal(await modeOf(join(home, 'local', 'runtime', 'pods')), 0o711);
    // The runtime's tmpfs for containers' files is unmounted at close, before the folder goes.
    await close();
    await rm(home, { recursive: true, force: true });
  },
);

test(
  "a job's logs and state are readable by ucompute alone: files 0600 in 0700 folders",
  await needs('bwrap', 'nft', 'ip'),
  async (t) => {
    const { home, backend, ended } = await openTestBackend(t);
    await backend.submitVolcanoJob('said', vcjob('said', [shellTask('main', 1, 'echo out; echo err >&2')]));
    assert.equal((await ended('said')).state, 'SUCCESS');
    const job = join(home, 'local', 'jobs', 'said');
    // Passable (its hosts file is bound by path as the containers' host users), not listable.
    assert.equal(await modeOf(job), 0o711);
    for (const file of ['state.0.json', 'state.1.json'])
      assert.equal(await modeOf(join(job, file)), 0o600, file);
    assert.equal(await modeOf(join(job, 'logs')), 0o700);
    const logs = await readdir(join(job, 'logs'));
    assert.ok(logs.length >= 2, logs.join(', '));
    for (const log of logs) assert.equal(await modeOf(join(job, 'logs', log)), 0o600, log);
  },
);
