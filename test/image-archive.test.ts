/**
 * Images built without a Docker daemon or registry, as OCI archives that skopeo reads and copies
 * (docs/kubernetes.md pushes them with `skopeo copy`): a recipe with files of this machine and a
 * build stage whose results the image gets without the stage's own tools.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { run } from '../src/backends/local/exec.ts';
import { assertExit, CHILD_ENV, runCli } from './support/cli.ts';
import { IMAGE_CACHE } from './support/example-images.ts';
import { needs } from './support/local-tools.ts';

const buildTools = await needs('skopeo', 'umoci', 'mmdebstrap');

/** The build stage's Debian root is made once a day on this machine, beside the example images. */
const BUILD_ENV = { ...CHILD_ENV, XDG_CACHE_HOME: join(IMAGE_CACHE, 'cache') };

const RECIPE = `name: lab/archived:1
variant: extract
packages: [busybox-static]
copy:
  - { from: app, to: /opt/app }
build:
  packages: []
  run: |
    mkdir -p /opt/out
    tr a-z A-Z < /opt/app/hello.txt > /opt/out/shout.txt
    touch /opt/stage-only
  keep: [/opt/out]
entrypoint: [/bin/busybox, cat]
cmd: [/opt/out/shout.txt]
`;

test(
  'images build --oci-archive: skopeo inspects it and copies it to a dir:, with the copied and the built files',
  buildTools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-archive-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await mkdir(join(dir, 'app'));
    await writeFile(join(dir, 'app', 'hello.txt'), 'hello\n');
    await writeFile(join(dir, 'archived.yml'), RECIPE);
    const archive = join(dir, 'archived.tar');
    const data = join(dir, 'data');

    const built = await runCli(
      ['images', 'build', join(dir, 'archived.yml'), '--oci-archive', archive, '--data-dir', data],
      { env: BUILD_ENV },
    );
    assertExit(built, 0);
    const [name, digest] = built.stdout.trim().split(' ');
    assert.equal(name, 'lab/archived:1');
    assert.match(digest!, /^sha256:[0-9a-f]{64}$/);

    const inspected = JSON.parse(await run('skopeo', ['inspect', `oci-archive:${archive}`]));
    assert.equal(inspected.Digest, digest);
    assert.deepEqual(inspected.Layers.length, 1);
    const config = JSON.parse(await run('skopeo', ['inspect', '--config', `oci-archive:${archive}`]));
    assert.deepEqual(config.config.Entrypoint, ['/bin/busybox', 'cat']);

    // What a registry push does, to a folder: the manifest and the layer, whose files are checked.
    const copied = join(dir, 'copied');
    await run('skopeo', ['copy', '--quiet', `oci-archive:${archive}`, `dir:${copied}`]);
    const manifest = JSON.parse(await readFile(join(copied, 'manifest.json'), 'utf8'));
    const layer = join(copied, manifest.layers[0].digest.replace(/^sha256:/, ''));
    const files = (await run('tar', ['-tzf', layer])).split('\n').map((f) => f.replace(/^\.\//, ''));
    for (const file of ['opt/app/hello.txt', 'opt/out/shout.txt', 'bin/busybox'])
      assert.ok(files.includes(file), `${file} is in the image`);
    assert.ok(!files.includes('opt/stage-only'), 'only `keep` comes from the build stage');
    assert.equal(await run('tar', ['-xzOf', layer, 'opt/out/shout.txt']), 'HELLO\n');

    // The archive carries its name: the local image store imports it as it is.
    const imported = await runCli(['images', 'import', archive, '--data-dir', data]);
    assertExit(imported, 0);
    assert.equal(imported.stdout.trim(), `lab/archived:1 ${digest}`);
  },
);

test('recipe files are checked field by field', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-archive-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(
    join(dir, 'bad.yml'),
    'name: lab/bad:1\ncopy: [{ from: x, to: relative }]\nnpm: [{ in: /opt/x, packages: ["a b"] }]\nbuild: { packages: [], run: "", keep: [] }\n',
  );
  const refused = await runCli([
    'images',
    'build',
    join(dir, 'bad.yml'),
    '--oci-archive',
    join(dir, 'x.tar'),
    '--data-dir',
    join(dir, 'data'),
  ]);
  assert.equal(refused.code, 2);
  for (const field of [
    'copy[0].to: must match ^/',
    'npm[0].packages[0]: must match',
    'build.run: must not be empty',
    'build.keep:',
  ])
    assert.ok(refused.stderr.includes(`bad.yml: ${field}`), field);
  assert.equal(refused.stdout, '');
});
