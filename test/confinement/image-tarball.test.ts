import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { run } from '../../src/backends/local/exec.ts';
import { assertExit, runCli } from '../support/cli.ts';
import { needs } from '../support/local-tools.ts';

/**
 * A hostile image tarball: its layer holds a path that climbs out (`../…`), an absolute path, and
 * files written through an absolute and a climbing symlink, all aimed at one host folder.
 * Importing it must leave that folder untouched.
 */

const tools = await needs('skopeo', 'umoci', 'tar');

const sha256 = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

/** The layer: every entry aimed at `target`, a host folder. */
async function hostileLayer(dir: string, target: string): Promise<string> {
  const staging = join(dir, 'staging');
  await mkdir(join(staging, 'via-link'), { recursive: true });
  await mkdir(join(staging, 'via-up'), { recursive: true });
  for (const name of ['climb', 'absolute', 'via-link/through', 'via-up/through']) {
    await writeFile(join(staging, name), `${name}\n`);
  }
  await symlink(target, join(staging, 'link'));
  await symlink(`${'../'.repeat(12)}${target.slice(1)}`, join(staging, 'up'));
  const layer = join(dir, 'layer.tar');
  // -P keeps `..` and leading `/` in names; each transform renames one staged file to its hostile path.
  await run('tar', [
    '-cPf',
    layer,
    '-C',
    staging,
    `--transform=s,^climb$,${'../'.repeat(12)}${target.slice(1)}/climb,`,
    `--transform=s,^absolute$,${target}/absolute,`,
    '--transform=s,^via-link/through$,link/through,',
    '--transform=s,^via-up/through$,up/through,',
    'link',
    'up',
    'climb',
    'absolute',
    'via-link/through',
    'via-up/through',
  ]);
  return layer;
}

/** A docker-archive (as `docker save` writes) of one image with that layer. */
async function dockerArchive(dir: string, layer: string): Promise<string> {
  const config = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: {},
    rootfs: { type: 'layers', diff_ids: [`sha256:${await sha256(layer)}`] },
  });
  const configName = `${createHash('sha256').update(config).digest('hex')}.json`;
  await writeFile(join(dir, configName), config);
  await writeFile(
    join(dir, 'manifest.json'),
    JSON.stringify([{ Config: configName, RepoTags: ['hostile:1'], Layers: ['layer.tar'] }]),
  );
  const archive = join(dir, 'hostile.tar');
  await run('tar', ['-cf', archive, '-C', dir, 'manifest.json', configName, 'layer.tar']);
  return archive;
}

test(
  'an image whose layer climbs out or writes through absolute symlinks stays inside its root folder',
  tools,
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ucompute-hostile-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const target = join(dir, 'host-folder');
    await mkdir(target);
    const archive = await dockerArchive(dir, await hostileLayer(dir, target));

    // The tarball is hostile indeed: a naive extraction writes all four files into the host folder.
    const naive = join(dir, 'naive');
    await mkdir(naive);
    await run('tar', ['-xPf', join(dir, 'layer.tar'), '-C', naive]);
    assert.deepEqual((await readdir(target)).sort(), ['absolute', 'climb', 'through'].sort());
    await rm(target, { recursive: true });
    await mkdir(target);

    const dataDir = join(dir, 'data');
    const imported = await runCli(['images', 'import', archive, '--data-dir', dataDir]);
    assertExit(imported, 0);
    assert.deepEqual(await readdir(target), [], 'nothing reached the host folder');
    const id = imported.stdout.trim().split(' ')[1]!.slice('sha256:'.length);
    const rootfs = join(dataDir, 'images', id, 'bundle', 'rootfs');
    // What the layer named lands inside the root folder, the links kept as links.
    assert.equal(await readFile(join(rootfs, target, 'climb'), 'utf8'), 'climb\n');
    assert.equal(await readFile(join(rootfs, target, 'absolute'), 'utf8'), 'absolute\n');
    assert.equal(await readFile(join(rootfs, target, 'through'), 'utf8'), 'via-up/through\n');
  },
);
