import assert from 'node:assert/strict';
import { chown, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { buildServer } from '../src/server/app.ts';
import { env } from './support/fixtures.ts';
import { needs } from './support/local-tools.ts';
import { openTestStore } from './support/store.ts';

/**
 * The files API through `app.inject()`, over a storage folder of its own: alice and bob each have
 * a home, both are members of `climate`, nobody of `secret`. "Jobs" plant symlinks in alice's home
 * by writing to the storage folder directly, as a job would through its mount.
 */

type Who = 'alice' | 'bob';

async function world(t: { after(fn: () => Promise<void>): void }) {
  const root = await mkdtemp(join(tmpdir(), 'ucompute-files-'));
  const store = await openTestStore();
  for (const name of ['alice', 'bob']) await store.users.createUser(name, false);
  await store.users.createProject('climate', 'Climate');
  await store.users.createProject('secret', 'Secret');
  await store.users.setMember('climate', 'alice', 'PI');
  await store.users.setMember('climate', 'bob', 'USER');
  const tokens = {
    alice: await store.users.createToken('alice', 'test'),
    bob: await store.users.createToken('bob', 'test'),
  };
  const backend = dryBackend({ runForMs: null });
  const service = createJobService({ store, env: env(), backend });
  const app = await buildServer({ service, store, env: env(), backend, storageRoot: root });
  t.after(async () => {
    await app.close();
    await service.stop();
    await backend.close();
    await store.close();
    await rm(root, { recursive: true, force: true });
  });
  const call = (who: Who, options: InjectOptions) =>
    app.inject({ ...options, headers: { authorization: `Bearer ${tokens[who]}`, ...options.headers } });
  return { root, app, call, ...helpers(call) };
}

function helpers(call: (who: Who, o: InjectOptions) => Promise<LightMyRequestResponse>) {
  const q = (path: string) => `path=${encodeURIComponent(path)}`;
  return {
    upload: (who: Who, path: string, body: string | Buffer, offset?: number) =>
      call(who, {
        method: 'PUT',
        url: `/api/files/upload?${q(path)}${offset !== undefined ? `&offset=${offset}` : ''}`,
        headers: { 'content-type': 'application/octet-stream' },
        payload: body,
      }),
    download: (who: Who, path: string, range?: string) =>
      call(who, { method: 'GET', url: `/api/files/download?${q(path)}`, headers: range ? { range } : {} }),
    stat: (who: Who, path: string) => call(who, { method: 'GET', url: `/api/files/stat?${q(path)}` }),
    browse: (who: Who, path: string, extra = '') =>
      call(who, { method: 'GET', url: `/api/files/browse?${q(path)}${extra}` }),
    post: (who: Who, what: 'folder' | 'move' | 'copy' | 'trash' | 'trash/empty', payload: object) =>
      call(who, { method: 'POST', url: `/api/files/${what}`, payload }),
  };
}

test('a file goes up, comes down whole or by range, and a broken upload continues at its size', async (t) => {
  const w = await world(t);
  const up = await w.upload('alice', '/home/alice/books/moby.txt', 'Call me Ishmael.');
  assert.equal(up.statusCode, 404, 'the folder books does not exist yet');
  assert.equal((await w.post('alice', 'folder', { path: '/home/alice/books' })).statusCode, 200);
  const written = await w.upload('alice', '/home/alice/books/moby.txt', 'Call me ');
  assert.equal(written.statusCode, 200, written.body);
  assert.equal(written.json().size, 8);
  const wrongOffset = await w.upload('alice', '/home/alice/books/moby.txt', 'Ishmael.', 3);
  assert.equal(wrongOffset.statusCode, 409);
  assert.match(wrongOffset.json().message, /continue at offset 8/);
  assert.equal((await w.upload('alice', '/home/alice/books/moby.txt', 'Ishmael.', 8)).statusCode, 200);
  assert.equal(await readFile(join(w.root, 'home/alice/books/moby.txt'), 'utf8'), 'Call me Ishmael.');

  const whole = await w.download('alice', '/home/alice/books/moby.txt');
  assert.equal(whole.statusCode, 200);
  assert.equal(whole.body, 'Call me Ishmael.');
  assert.equal(whole.headers['accept-ranges'], 'bytes');
  const part = await w.download('alice', '/home/alice/books/moby.txt', 'bytes=8-14');
  assert.equal(part.statusCode, 206);
  assert.equal(part.body, 'Ishmael');
  assert.equal(part.headers['content-range'], 'bytes 8-14/16');
  assert.equal((await w.download('alice', '/home/alice/books/moby.txt', 'bytes=-1')).body, '.');
  const outside = await w.download('alice', '/home/alice/books/moby.txt', 'bytes=16-');
  assert.equal(outside.statusCode, 416);
  assert.equal(outside.headers['content-range'], 'bytes */16');

  // Starting again (offset 0) replaces the file.
  await w.upload('alice', '/home/alice/books/moby.txt', 'Loomings');
  assert.equal((await w.download('alice', '/home/alice/books/moby.txt')).body, 'Loomings');
});

test('a folder is listed by name a page at a time, and stat describes one entry', async (t) => {
  const w = await world(t);
  await w.post('alice', 'folder', { path: '/home/alice/many' });
  for (const name of ['e', 'a', 'd', 'c', 'b']) await w.upload('alice', `/home/alice/many/${name}`, name);
  const names: string[] = [];
  let next = '';
  for (let page = 0; page < 5; page++) {
    const r = (await w.browse('alice', '/home/alice/many', `&itemsPerPage=2${next}`)).json();
    names.push(...r.items.map((i: { name: string }) => i.name));
    if (r.next === null) break;
    next = `&next=${encodeURIComponent(r.next)}`;
  }
  assert.deepEqual(names, ['a', 'b', 'c', 'd', 'e']);
  const entry = (await w.stat('alice', '/home/alice/many/c')).json();
  assert.deepEqual(
    { ...entry, modifiedAt: 0 },
    {
      name: 'c',
      path: '/home/alice/many/c',
      type: 'file',
      size: 1,
      modifiedAt: 0,
    },
  );
  assert.equal((await w.stat('alice', '/home/alice/many')).json().type, 'folder');
  // A user's home exists from the first look.
  assert.deepEqual((await w.browse('bob', '/home/bob')).json(), { items: [], next: null });
});

test('move and copy never overwrite, copy takes whole folders, and nothing moves into itself', async (t) => {
  const w = await world(t);
  await w.post('alice', 'folder', { path: '/home/alice/a/b' });
  await w.upload('alice', '/home/alice/a/b/f.txt', 'data');
  const copied = await w.post('alice', 'copy', { from: '/home/alice/a', to: '/projects/climate/a' });
  assert.equal(copied.statusCode, 200, copied.body);
  assert.equal(await readFile(join(w.root, 'projects/climate/a/b/f.txt'), 'utf8'), 'data');
  assert.equal((await w.download('bob', '/projects/climate/a/b/f.txt')).body, 'data');
  const over = await w.post('alice', 'copy', { from: '/home/alice/a', to: '/projects/climate/a' });
  assert.equal(over.statusCode, 409);
  assert.equal(
    (await w.post('alice', 'move', { from: '/home/alice/a', to: '/home/alice/a/b/a' })).statusCode,
    400,
  );
  const moved = await w.post('alice', 'move', { from: '/home/alice/a/b/f.txt', to: '/home/alice/g.txt' });
  assert.equal(moved.statusCode, 200, moved.body);
  assert.equal(moved.json().path, '/home/alice/g.txt');
  await assert.rejects(lstat(join(w.root, 'home/alice/a/b/f.txt')), { code: 'ENOENT' });
  assert.equal(
    (await w.post('alice', 'move', { from: '/home/alice/g.txt', to: '/home/alice/a' })).statusCode,
    409,
  );
  assert.equal((await w.post('alice', 'move', { from: '/home/alice', to: '/home/alice2' })).statusCode, 400);
});

test('delete moves to the drive trash under a free name, and the trash keeps the content', async (t) => {
  const w = await world(t);
  await w.upload('alice', '/home/alice/x.txt', 'first');
  const trashed = await w.post('alice', 'trash', { path: '/home/alice/x.txt' });
  assert.equal(trashed.statusCode, 200, trashed.body);
  assert.equal(trashed.json().path, '/home/alice/Trash/x.txt');
  await w.upload('alice', '/home/alice/x.txt', 'second');
  assert.equal(
    (await w.post('alice', 'trash', { path: '/home/alice/x.txt' })).json().path,
    '/home/alice/Trash/x.txt (2)',
  );
  assert.equal(await readFile(join(w.root, 'home/alice/Trash/x.txt'), 'utf8'), 'first');
  assert.equal(await readFile(join(w.root, 'home/alice/Trash/x.txt (2)'), 'utf8'), 'second');
  await assert.rejects(lstat(join(w.root, 'home/alice/x.txt')), { code: 'ENOENT' });
  assert.equal((await w.post('alice', 'trash', { path: '/home/alice/Trash/x.txt' })).statusCode, 400);
  assert.equal((await w.post('bob', 'trash', { path: '/home/bob' })).statusCode, 400);
});

test('emptying a trash deletes what is in it for good, and nothing a link in it leads to', async (t) => {
  const w = await world(t);
  await w.post('alice', 'folder', { path: '/home/alice/run/out' });
  await w.upload('alice', '/home/alice/run/out/a.dat', 'x'.repeat(1000));
  await w.upload('alice', '/home/alice/notes.txt', 'hello');
  await w.upload('alice', '/home/alice/keep.txt', 'kept');
  await w.upload('bob', '/home/bob/bobs.txt', 'bob');
  for (const path of ['/home/alice/run', '/home/alice/notes.txt']) {
    assert.equal((await w.post('alice', 'trash', { path })).statusCode, 200);
  }
  // A job planted links in the trash: to a folder of alice's and to bob's home.
  await symlink(join(w.root, 'home/alice'), join(w.root, 'home/alice/Trash/home-link'));
  await symlink(join(w.root, 'home/bob'), join(w.root, 'home/alice/Trash/run/out/bob-link'));

  assert.equal((await w.post('bob', 'trash/empty', { drive: '/home/alice' })).statusCode, 404);
  const notDrive = await w.post('alice', 'trash/empty', { drive: '/home/alice/Trash' });
  assert.equal(notDrive.statusCode, 400);
  assert.match(notDrive.json().why, /^drive: /);
  const emptied = await w.post('alice', 'trash/empty', { drive: '/home/alice' });
  assert.equal(emptied.statusCode, 200, emptied.body);
  assert.deepEqual(emptied.json(), { entries: 3, bytes: 1005 });
  assert.deepEqual((await w.browse('alice', '/home/alice/Trash')).json().items, []);
  assert.equal(await readFile(join(w.root, 'home/alice/keep.txt'), 'utf8'), 'kept');
  assert.equal(await readFile(join(w.root, 'home/bob/bobs.txt'), 'utf8'), 'bob');
  // Again, and on a drive that never had a trash: nothing to do.
  assert.deepEqual((await w.post('alice', 'trash/empty', { drive: '/home/alice' })).json(), {
    entries: 0,
    bytes: 0,
  });
  assert.deepEqual((await w.post('bob', 'trash/empty', { drive: '/home/bob' })).json(), {
    entries: 0,
    bytes: 0,
  });
});

test("another user's drive and projects one is not a member of are not found", async (t) => {
  const w = await world(t);
  await w.upload('bob', '/home/bob/secret.txt', 'bob only');
  await mkdir(join(w.root, 'projects/secret'), { recursive: true });
  await writeFile(join(w.root, 'projects/secret/plan.txt'), 'secret');
  for (const path of ['/home/bob/secret.txt', '/projects/secret/plan.txt', '/home/bobby', '/']) {
    assert.equal((await w.download('alice', path)).statusCode, 404, path);
    assert.equal((await w.stat('alice', path)).statusCode, 404, path);
  }
  assert.equal((await w.upload('alice', '/home/bob/planted.txt', 'x')).statusCode, 404);
  assert.equal((await w.post('alice', 'trash', { path: '/home/bob/secret.txt' })).statusCode, 404);
  assert.equal(
    (await w.post('alice', 'copy', { from: '/home/bob/secret.txt', to: '/home/alice/s' })).statusCode,
    404,
  );
  assert.equal((await w.post('alice', 'move', { from: '/home/alice', to: '/home/bob/a' })).statusCode, 400);
  await assert.rejects(lstat(join(w.root, 'home/bob/planted.txt')), { code: 'ENOENT' });
  assert.equal(await readFile(join(w.root, 'home/bob/secret.txt'), 'utf8'), 'bob only');
});

test('.. and encoded .. are refused before anything is read', async (t) => {
  const w = await world(t);
  await w.upload('bob', '/home/bob/secret.txt', 'bob only');
  for (const url of [
    '/api/files/download?path=/home/alice/../bob/secret.txt',
    '/api/files/download?path=/home/alice/%2e%2e/bob/secret.txt',
    '/api/files/download?path=%2Fhome%2Falice%2F%2E%2E%2Fbob%2Fsecret.txt',
    '/api/files/download?path=home/bob/secret.txt',
    '/api/files/stat?path=/home/alice/./x',
  ]) {
    const r = await w.call('alice', { method: 'GET', url });
    assert.equal(r.statusCode, 400, url);
    assert.match(r.json().message, /path: must be an absolute path without \. or \.\. segments/);
  }
  const up = await w.call('alice', {
    method: 'PUT',
    url: '/api/files/upload?path=/home/alice/%2e%2e/bob/secret.txt',
    headers: { 'content-type': 'application/octet-stream' },
    payload: 'overwritten',
  });
  assert.equal(up.statusCode, 400);
  assert.equal(await readFile(join(w.root, 'home/bob/secret.txt'), 'utf8'), 'bob only');
});

test('names too long or not valid Unicode are 400 naming the field, and nothing is made', async (t) => {
  const w = await world(t);
  const long = `/home/alice/${'n'.repeat(300)}`;
  const expectRefused = (r: LightMyRequestResponse, field: string, message: RegExp) => {
    assert.equal(r.statusCode, 400, r.body);
    assert.match(r.json().message, new RegExp(`^${field}: ${message.source}`));
  };
  const tooLong = /the name "n{20}…" is 300 bytes long; a file name holds at most 255/;
  expectRefused(await w.upload('alice', long, 'x'), 'path', tooLong);
  expectRefused(await w.post('alice', 'folder', { path: long }), 'path', tooLong);
  expectRefused(await w.stat('alice', long), 'path', tooLong);
  expectRefused(await w.browse('alice', long), 'path', tooLong);
  expectRefused(await w.download('alice', long), 'path', tooLong);
  await w.upload('alice', '/home/alice/a.txt', 'a');
  expectRefused(await w.post('alice', 'move', { from: '/home/alice/a.txt', to: long }), 'to', tooLong);
  expectRefused(await w.post('alice', 'copy', { from: '/home/alice/a.txt', to: long }), 'to', tooLong);
  // Two-byte letters: 200 characters are 400 bytes.
  expectRefused(
    await w.post('alice', 'folder', { path: `/home/alice/${'é'.repeat(200)}` }),
    'path',
    /the name/,
  );
  // A path longer than the file system takes, though each name fits.
  const deep = `/home/alice/${Array.from({ length: 20 }, () => 'd'.repeat(250)).join('/')}`;
  expectRefused(await w.post('alice', 'folder', { path: deep }), 'path', /is \d+ bytes long .*at most 4095/);
  expectRefused(
    await w.post('alice', 'folder', { path: '/home/alice/half\ud800' }),
    'path',
    /holds a character that is not valid Unicode/,
  );
  assert.deepEqual(
    (await w.browse('alice', '/home/alice')).json().items.map((e: { name: string }) => e.name),
    ['a.txt'],
  );
});

test('a name as long as a name may be goes to the trash twice: the second is shortened to fit', async (t) => {
  const w = await world(t);
  const name = 'n'.repeat(255);
  for (const content of ['first', 'second']) {
    assert.equal((await w.upload('alice', `/home/alice/${name}`, content)).statusCode, 200);
    const trashed = await w.post('alice', 'trash', { path: `/home/alice/${name}` });
    assert.equal(trashed.statusCode, 200, trashed.body);
  }
  const names = (await w.browse('alice', '/home/alice/Trash'))
    .json()
    .items.map((e: { name: string }) => e.name);
  assert.deepEqual(names.sort(), [name, `${'n'.repeat(251)} (2)`].sort());
});

test('symlinks a job planted in a drive lead nowhere: not read, written, listed or moved through', async (t) => {
  const w = await world(t);
  const outside = await mkdtemp(join(tmpdir(), 'ucompute-outside-'));
  t.after(() => rm(outside, { recursive: true, force: true }));
  await writeFile(join(outside, 'victim'), 'original');
  await w.upload('bob', '/home/bob/secret.txt', 'bob only');
  await mkdir(join(w.root, 'home/alice'), { recursive: true });
  // What a job of alice's can do through its mount of /home/alice:
  await symlink('/', join(w.root, 'home/alice/root'));
  await symlink(outside, join(w.root, 'home/alice/outside'));
  await symlink(join(w.root, 'home/bob'), join(w.root, 'home/alice/bob'));
  await symlink('../bob/secret.txt', join(w.root, 'home/alice/secret.txt'));
  await symlink(join(outside, 'victim'), join(w.root, 'home/alice/victim'));

  for (const path of [
    '/home/alice/root/etc/passwd',
    '/home/alice/bob/secret.txt',
    '/home/alice/secret.txt',
  ]) {
    const r = await w.download('alice', path);
    assert.equal(r.statusCode, 400, `${path}: ${r.body}`);
    assert.doesNotMatch(r.body, /bob only|root:/);
  }
  assert.equal((await w.browse('alice', '/home/alice/root')).statusCode, 400);
  assert.equal((await w.browse('alice', '/home/alice/bob')).statusCode, 400);
  assert.equal((await w.stat('alice', '/home/alice/bob/secret.txt')).statusCode, 400);
  assert.equal((await w.stat('alice', '/home/alice/bob')).json().type, 'link');

  assert.equal((await w.upload('alice', '/home/alice/victim', 'written')).statusCode, 400);
  assert.equal((await w.upload('alice', '/home/alice/outside/new', 'written')).statusCode, 400);
  assert.equal((await w.upload('alice', '/home/alice/bob/secret.txt', 'written')).statusCode, 400);
  assert.equal((await w.post('alice', 'folder', { path: '/home/alice/outside/made' })).statusCode, 400);
  assert.equal(
    (await w.post('alice', 'copy', { from: '/home/alice/bob/secret.txt', to: '/home/alice/copy' }))
      .statusCode,
    400,
  );
  assert.equal(
    (await w.post('alice', 'move', { from: '/home/alice/bob/secret.txt', to: '/home/alice/mine' }))
      .statusCode,
    400,
  );
  assert.equal(await readFile(join(outside, 'victim'), 'utf8'), 'original');
  await assert.rejects(lstat(join(outside, 'new')), { code: 'ENOENT' });
  await assert.rejects(lstat(join(outside, 'made')), { code: 'ENOENT' });
  assert.equal(await readFile(join(w.root, 'home/bob/secret.txt'), 'utf8'), 'bob only');

  // A copied link stays a link (it is never followed); trashing a link moves the link only.
  const copied = await w.post('alice', 'copy', { from: '/home/alice/secret.txt', to: '/home/alice/copy' });
  assert.equal(copied.json().type, 'link');
  assert.equal((await w.post('alice', 'trash', { path: '/home/alice/bob' })).statusCode, 200);
  assert.equal(await readFile(join(w.root, 'home/bob/secret.txt'), 'utf8'), 'bob only');
  assert.equal((await lstat(join(w.root, 'home/alice/Trash/bob'))).isSymbolicLink(), true);
});

test('what the server writes is owned like the drive it writes in', await needs(), async (t) => {
  const w = await world(t);
  await mkdir(join(w.root, 'home/alice'), { recursive: true });
  await chown(join(w.root, 'home/alice'), 11042, 11042);
  await w.post('alice', 'folder', { path: '/home/alice/data/raw' });
  await w.upload('alice', '/home/alice/data/raw/x', 'x');
  await w.post('alice', 'copy', { from: '/home/alice/data', to: '/home/alice/copy' });
  await w.post('alice', 'trash', { path: '/home/alice/copy' });
  for (const path of ['data', 'data/raw', 'data/raw/x', 'Trash', 'Trash/copy', 'Trash/copy/raw/x']) {
    const s = await stat(join(w.root, 'home/alice', path));
    assert.deepEqual([path, s.uid, s.gid], [path, 11042, 11042]);
  }
  assert.equal((await stat(join(w.root, 'home/alice/data/raw/x'))).mode & 0o777, 0o644);
});
