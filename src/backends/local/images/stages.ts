import { cp, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { type Static, Type } from '@sinclair/typebox';
import { closed } from '../../../model/schema.ts';
import { run } from '../exec.ts';
import { buildRoot } from './build-root.ts';

// What a recipe adds to its Debian packages: files of this machine, npm packages installed here,
// and a build stage (a Debian root of its own, as a multi-stage Dockerfile's) whose results the
// image gets without its compilers. All of it is put together first as a tree rooted like the
// image's, which then goes into the image's root.

const ImagePath = Type.String({ pattern: '^/' });
const DebianPackage = Type.String({ pattern: '^[a-z0-9][a-z0-9+.-]+$' });

const NpmInstalls = Type.Array(
  Type.Object(
    { in: ImagePath, packages: Type.Optional(Type.Array(Type.String({ pattern: '^[@a-z0-9][^\\s]*$' }))) },
    closed,
  ),
);

export const RecipeFiles = {
  /** Files and folders of this machine, `from` relative to the recipe's folder, `to` in the image. */
  copy: Type.Optional(
    Type.Array(Type.Object({ from: Type.String({ minLength: 1 }), to: ImagePath }, closed)),
  ),
  /**
   * npm packages installed from the registry on this machine, without their install scripts
   * (native parts are compiled in `build`), into the image's folder `in`: the named `packages`,
   * else what the package.json and lockfile copied there name (`npm ci --omit=dev`).
   */
  npm: Type.Optional(NpmInstalls),
  /**
   * A build stage: a Debian root with `packages`, the files above and its own `npm` installs (tools
   * the image does not get), in which `run` runs (sh -e, as root of that root); the folders `keep`
   * go from it into the image.
   */
  build: Type.Optional(
    Type.Object(
      {
        packages: Type.Array(DebianPackage),
        npm: Type.Optional(NpmInstalls),
        run: Type.String({ minLength: 1 }),
        keep: Type.Array(ImagePath, { minItems: 1 }),
      },
      closed,
    ),
  ),
};
const Files = Type.Object(RecipeFiles);
type Files = Static<typeof Files>;

/**
 * The recipe's files as a tree in `work`/files, rooted like the image's, its build stage's `keep`
 * folders included; undefined when the recipe adds nothing to its packages. `cache` keeps build
 * stages' Debian roots between builds (./build-root.ts).
 */
export async function stageFiles(
  recipe: Files & { suite?: string },
  from: string,
  work: string,
  cache: string,
): Promise<string | undefined> {
  if (!recipe.copy?.length && !recipe.npm?.length && !recipe.build) return undefined;
  const tree = join(work, 'files');
  await mkdir(tree, { recursive: true });
  for (const { from: source, to } of recipe.copy ?? []) {
    await cp(resolve(from, source), join(tree, to), { recursive: true, verbatimSymlinks: true });
  }
  await npmInstall(recipe.npm ?? [], tree);
  if (recipe.build) await buildStage(recipe.build, recipe.suite ?? 'bookworm', tree, work, cache);
  return tree;
}

/** Installs npm packages into the tree's folders, without their install scripts. */
async function npmInstall(installs: Static<typeof NpmInstalls>, tree: string): Promise<void> {
  const quiet = ['--ignore-scripts', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error'];
  for (const { in: folder, packages } of installs) {
    const prefix = join(tree, folder);
    await mkdir(prefix, { recursive: true });
    await run(
      'npm',
      packages
        ? ['install', '--prefix', prefix, '--no-save', ...quiet, ...packages]
        : ['ci', '--prefix', prefix, ...quiet],
    );
  }
}

/**
 * Runs the build stage on the tree and puts its `keep` folders back into the tree: in a copy of the
 * cached root with the stage's packages (mmdebstrap's way to reuse a root: unpacked in its setup,
 * nothing installed or updated), so that only the first build of a day installs them.
 */
async function buildStage(
  build: NonNullable<Files['build']>,
  suite: string,
  tree: string,
  work: string,
  cache: string,
): Promise<void> {
  const script = join(work, 'build.sh');
  await writeFile(script, build.run);
  const tools = join(work, 'build-tools');
  await mkdir(tools);
  await npmInstall(build.npm ?? [], tools);
  const root = await buildRoot(cache, suite, build.packages);
  await run('mmdebstrap', [
    '--variant=custom',
    '--skip=update',
    '--quiet',
    '--format=null',
    `--setup-hook=tar-in ${root} /`,
    `--customize-hook=sync-in ${tree} /`,
    `--customize-hook=sync-in ${tools} /`,
    `--customize-hook=upload ${script} /tmp/ucompute-build.sh`,
    // In an environment of its own: this machine's (mmdebstrap keeps it) may point npm elsewhere.
    '--customize-hook=chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root sh -e /tmp/ucompute-build.sh',
    ...build.keep.map((path) => `--customize-hook=sync-out ${path} ${join(tree, path)}`),
    suite,
    '/dev/null',
  ]);
}
