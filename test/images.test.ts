import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { imageArgv, imageEnv, imageUser } from '../src/backends/local/images/oci-config.ts';
import { configArgs, readRecipe } from '../src/backends/local/images/recipe.ts';
import { canonical, familiar, parseReference } from '../src/backends/local/images/reference.ts';
import { imageResolver } from '../src/backends/local/images/resolve.ts';
import { openImageStore } from '../src/backends/local/images/store.ts';
import { ValidationError } from '../src/model/errors.ts';
import { assertExit, runCliHere } from './support/cli.ts';
import { busyboxArchive } from './support/images.ts';
import { needs } from './support/local-tools.ts';
import { ROOT } from './support/paths.ts';

const tools = await needs('skopeo', 'umoci', 'busybox');
const buildTools = await needs('skopeo', 'umoci', 'mmdebstrap');

async function tempDir(
  t: { after(fn: () => Promise<void>): void },
  prefix = 'ucompute-images-',
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('image references normalize as Docker reads them, and anything else is refused by name', () => {
  const full = (text: string) => canonical(parseReference(text));
  assert.equal(full('debian'), 'docker.io/library/debian:latest');
  assert.equal(full('debian:bookworm-slim'), 'docker.io/library/debian:bookworm-slim');
  assert.equal(full('ucompute/openmpi:4.1-bookworm'), 'docker.io/ucompute/openmpi:4.1-bookworm');
  assert.equal(full('ghcr.io/org/tool:1.2'), 'ghcr.io/org/tool:1.2');
  assert.equal(full('localhost:5000/tool'), 'localhost:5000/tool:latest');
  assert.equal(
    full(`busybox@sha256:${'a'.repeat(64)}`),
    `docker.io/library/busybox@sha256:${'a'.repeat(64)}`,
  );
  assert.equal(familiar(parseReference('docker.io/library/debian:12')), 'debian:12');
  for (const bad of [
    'Debian:12',
    'a b',
    '',
    'debian:',
    '../x',
    'debian:tag/with/slash',
    `x:${'t'.repeat(129)}`,
  ]) {
    assert.throws(() => parseReference(bad), /is not a valid image reference/, bad);
  }
});

test('command replaces the entrypoint and drops the image Cmd; args replace the Cmd', () => {
  const image = { Entrypoint: ['/entry'], Cmd: ['default'] };
  assert.deepEqual(imageArgv(image, [], []), ['/entry', 'default']);
  assert.deepEqual(imageArgv(image, [], ['mine']), ['/entry', 'mine']);
  assert.deepEqual(imageArgv(image, ['/bin/sh'], []), ['/bin/sh']);
  assert.deepEqual(imageArgv(image, ['/bin/sh'], ['-c', 'x']), ['/bin/sh', '-c', 'x']);
  assert.deepEqual(imageArgv({ Cmd: ['only-cmd'] }, [], []), ['only-cmd']);
  assert.deepEqual(imageArgv({}, [], []), []);
  assert.deepEqual(imageEnv({ Env: ['A=1', 'B=x=y', 'A=2', 'junk'] }), { A: '2', B: 'x=y' });
});

test("the image's User is resolved in its own /etc/passwd and /etc/group; runAsUser/runAsGroup win", async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'etc'));
  await writeFile(
    join(root, 'etc/passwd'),
    'root:x:0:0::/root:/bin/sh\napp:x:1234:2345::/home/app:/bin/sh\n',
  );
  await writeFile(join(root, 'etc/group'), 'root:x:0:\nstaff:x:2345:\nwheel:x:10:\n');
  const none = { runAsUser: undefined, runAsGroup: undefined };
  assert.deepEqual(await imageUser(root, {}, none), { uid: 0, gid: 0 });
  assert.deepEqual(await imageUser(root, { User: 'app' }, none), { uid: 1234, gid: 2345 });
  assert.deepEqual(await imageUser(root, { User: 'app:wheel' }, none), { uid: 1234, gid: 10 });
  assert.deepEqual(await imageUser(root, { User: '77:88' }, none), { uid: 77, gid: 88 });
  assert.deepEqual(await imageUser(root, { User: '77' }, none), { uid: 77, gid: 0 });
  assert.deepEqual(await imageUser(root, { User: 'app' }, { runAsUser: 500, runAsGroup: undefined }), {
    uid: 500,
    gid: 0,
  });
  assert.deepEqual(await imageUser(root, { User: 'app' }, { runAsUser: 1234, runAsGroup: undefined }), {
    uid: 1234,
    gid: 2345,
  });
  assert.deepEqual(await imageUser(root, { User: 'app' }, { runAsUser: undefined, runAsGroup: 7 }), {
    uid: 1234,
    gid: 7,
  });
  await assert.rejects(
    imageUser(root, { User: 'nobody' }, none),
    /User "nobody": no user nobody in its \/etc\/passwd/,
  );
  await assert.rejects(
    imageUser(root, { User: 'app:nogroup' }, none),
    /no group nogroup in its \/etc\/group/,
  );
});

test("an image's /etc/passwd that links to a host file is not read", async (t) => {
  const dir = await tempDir(t);
  const hostFile = join(dir, 'host-passwd');
  await writeFile(hostFile, 'secret:x:4242:4242::/:/bin/sh\n');
  const linkedFile = join(dir, 'linked-file');
  await mkdir(join(linkedFile, 'etc'), { recursive: true });
  await symlink(hostFile, join(linkedFile, 'etc/passwd'));
  const linkedEtc = join(dir, 'linked-etc');
  await mkdir(join(dir, 'host-etc'));
  await writeFile(join(dir, 'host-etc/passwd'), 'secret:x:4242:4242::/:/bin/sh\n');
  await mkdir(linkedEtc);
  await symlink(join(dir, 'host-etc'), join(linkedEtc, 'etc'));
  const none = { runAsUser: undefined, runAsGroup: undefined };
  for (const root of [linkedFile, linkedEtc]) {
    await assert.rejects(imageUser(root, { User: 'secret' }, none), /no user secret/, root);
    assert.deepEqual(await imageUser(root, {}, { runAsUser: 4242, runAsGroup: undefined }), {
      uid: 4242,
      gid: 0,
    });
  }
});

test('a container finds its image in local.images first, then the store; else the host view or a clear refusal', async (t) => {
  const store = await openImageStore(await tempDir(t));
  const folders = { 'tools:1': '/srv/tools' };
  const allowed = imageResolver({ folders, store, hostUserland: true });
  assert.deepEqual(await allowed('tools:1'), {
    root: { kind: 'folder', path: '/srv/tools' },
    config: null,
    notice: null,
  });
  assert.deepEqual(await allowed('ubuntu:22.04'), {
    root: { kind: 'host-view' },
    config: null,
    notice: "Image ubuntu:22.04 is not in the local image store; running on the host's userland view",
  });
  const refused = imageResolver({ folders, store, hostUserland: false });
  await assert.rejects(
    refused('ubuntu:22.04'),
    /image ubuntu:22.04 is not in the local image store \(and local.hostUserland is off\): add it with `ucompute images import FILE --name ubuntu:22.04`/,
  );
  assert.equal((await refused('tools:1')).root.kind, 'folder');
});

test('recipes are checked field by field and give umoci their config', async (t) => {
  const dir = await tempDir(t);
  const good = join(dir, 'good.yml');
  await writeFile(
    good,
    'name: tools:1\npackages: [coreutils, python3]\nenv: { LANG: C.UTF-8 }\nentrypoint: [/bin/sh, -c]\ncmd: [echo hi]\nworkingDir: /srv\nuser: "1000:1000"\n',
  );
  const recipe = await readRecipe(good);
  assert.deepEqual(configArgs(recipe), [
    '--config.env=LANG=C.UTF-8',
    '--config.entrypoint=/bin/sh',
    '--config.entrypoint=-c',
    '--config.cmd=echo hi',
    '--config.workingdir=/srv',
    '--config.user=1000:1000',
  ]);
  const bad = join(dir, 'bad.yml');
  await writeFile(bad, 'name: Not Valid\npackages: ["rm -rf"]\nvariant: everything\nextra: 1\n');
  await assert.rejects(readRecipe(bad), (e: unknown) => {
    assert.ok(e instanceof ValidationError);
    const paths = e.issues.map((i) => i.path).join(' ');
    for (const field of ['packages', 'variant', 'extra']) assert.match(paths, new RegExp(`${bad}: ${field}`));
    return true;
  });
  const badName = join(dir, 'bad-name.yml');
  await writeFile(badName, 'name: Not Valid\n');
  await assert.rejects(
    readRecipe(badName),
    /bad-name\.yml: name: "Not Valid" is not a valid image reference/,
  );
  for (const file of await readdir(join(ROOT, 'examples/images'))) {
    await readRecipe(join(ROOT, 'examples/images', file));
  }
});

test(
  'images import, ls and rm: a tarball unpacked once, names sharing it, the last rm removes it',
  tools,
  async (t) => {
    const dir = await tempDir(t);
    const dataDir = join(dir, 'data');
    const archive = await busyboxArchive(dir, { name: 'busybox-test:1', cmd: ['sh'] });
    const cli = (...args: string[]) => runCliHere(['images', ...args, '--data-dir', dataDir]);

    const imported = await cli('import', archive);
    assertExit(imported, 0);
    const [name, id] = imported.stdout.trim().split(' ');
    assert.equal(name, 'busybox-test:1');
    assert.match(id!, /^sha256:[0-9a-f]{64}$/);
    // Passable, not listable: containers' unprivileged host users reach image roots by path.
    assert.equal((await stat(join(dataDir, 'images'))).mode & 0o777, 0o711);
    assertExit(await cli('import', archive, '--name', 'ghcr.io/lab/box:2'), 0);

    const listed = await cli('ls');
    assertExit(listed, 0);
    const lines = listed.stdout.trim().split('\n');
    assert.match(lines[0]!, /^NAME +ID +SIZE +CREATED$/);
    const short = id!.slice(7, 19);
    assert.match(
      lines[1]!,
      new RegExp(`^busybox-test:1 +${short} +\\d+\\.\\d (KiB|MiB) +\\d{4}-\\d\\d-\\d\\dT`),
    );
    assert.match(lines[2]!, new RegExp(`^ghcr.io/lab/box:2 +${short} `));
    assert.equal(lines.length, 3);
    const unpacked = (await readdir(join(dataDir, 'images'))).filter((f) => /^[0-9a-f]{64}$/.test(f));
    assert.deepEqual(unpacked, [id!.slice(7)], 'one unpacked copy for both names');

    const store = await openImageStore(join(dataDir, 'images'));
    assert.equal((await store.find('busybox-test:1'))?.id, id);
    assert.equal((await store.find('docker.io/library/busybox-test:1'))?.id, id);
    assert.equal(
      (await store.find(`elsewhere/any@${id}`))?.id,
      id,
      'a digest finds the image under any name',
    );
    assert.equal(await store.find('busybox-test:2'), null);
    assert.equal(await store.find(`busybox-test@sha256:${'0'.repeat(64)}`), null);

    assertExit(await cli('rm', 'busybox-test:1'), 0);
    assert.ok(await stat(join(dataDir, 'images', id!.slice(7), 'bundle/rootfs/bin/busybox')));
    assertExit(await cli('rm', 'ghcr.io/lab/box:2'), 0);
    await assert.rejects(stat(join(dataDir, 'images', id!.slice(7))), { code: 'ENOENT' });
    assert.equal((await cli('ls')).stdout.trim(), 'NAME  ID  SIZE  CREATED');

    const missing = await cli('rm', 'busybox-test:1');
    assertExit(missing, 1);
    assert.match(missing.stderr, /there is no image busybox-test:1 in the local image store/);
  },
);

test(
  'images import refuses a bad name, a tarball without one, and a file that is no image',
  tools,
  async (t) => {
    const dir = await tempDir(t);
    const dataDir = join(dir, 'data');
    const cli = (...args: string[]) => runCliHere(['images', ...args, '--data-dir', dataDir]);
    const unnamed = await busyboxArchive(dir, { cmd: ['sh'] });

    const badName = await cli('import', unnamed, '--name', 'Busy Box');
    assertExit(badName, 2);
    assert.match(badName.stderr, /--name: "Busy Box" is not a valid image reference/);
    const noName = await cli('import', unnamed);
    assertExit(noName, 1);
    assert.match(noName.stderr, /image\.tar carries no image name; give one with --name NAME:TAG/);
    const notImage = join(dir, 'notes.txt');
    await writeFile(notImage, 'hello\n');
    const refused = await cli('import', notImage, '--name', 'x:1');
    assertExit(refused, 1);
    assert.match(refused.stderr, /error: /);
    assert.equal((await cli('ls')).stdout.trim(), 'NAME  ID  SIZE  CREATED', 'nothing was added');
    assert.deepEqual(await readdir(join(dataDir, 'images', 'tmp')), [], 'no import left behind');
  },
);

test(
  'images pull says which image it could not pull and why (no registry is reachable here)',
  tools,
  async (t) => {
    const dataDir = join(await tempDir(t), 'data');
    // Port 9 on loopback: nothing listens, the connection is refused at once.
    const pulled = await runCliHere(['images', 'pull', '127.0.0.1:9/lab/tool:1', '--data-dir', dataDir]);
    assertExit(pulled, 1);
    assert.match(pulled.stderr, /^error: could not pull 127\.0\.0\.1:9\/lab\/tool:1: .*connection refused/m);
    const bad = await runCliHere(['images', 'pull', 'UPPER/case', '--data-dir', dataDir]);
    assertExit(bad, 2);
    assert.match(bad.stderr, /REF: "UPPER\/case" is not a valid image reference/);
  },
);

test(
  'images build makes an image from Debian packages with mmdebstrap and umoci, and stores it',
  buildTools,
  async (t) => {
    const dir = await tempDir(t);
    const dataDir = join(dir, 'data');
    const recipe = join(dir, 'busybox.yml');
    // The `extract` variant only unpacks the packages: the smallest build, a few seconds from the mirror.
    await writeFile(
      recipe,
      'name: lab/busybox-built:1\nvariant: extract\npackages: [busybox-static]\nenv: { MOTTO: built here }\nentrypoint: [/bin/busybox, sh, -c]\ncmd: [echo "$MOTTO"]\nworkingDir: /\nuser: "0:0"\n',
    );
    const built = await runCliHere(['images', 'build', recipe, '--data-dir', dataDir]);
    assertExit(built, 0);
    const id = built.stdout.trim().split(' ')[1]!;
    assert.match(built.stdout, /^lab\/busybox-built:1 sha256:[0-9a-f]{64}\n$/);
    const store = await openImageStore(join(dataDir, 'images'));
    const image = await store.find('lab/busybox-built:1');
    assert.equal(image?.id, id);
    assert.deepEqual(image?.config, {
      Env: ['MOTTO=built here'],
      Entrypoint: ['/bin/busybox', 'sh', '-c'],
      Cmd: ['echo "$MOTTO"'],
      WorkingDir: '/',
      User: '0:0',
    });
    assert.ok((await stat(join(image!.root, 'bin/busybox'))).isFile());
    assert.deepEqual(await readdir(join(dataDir, 'images', 'tmp')), [], 'no build left behind');
  },
);
