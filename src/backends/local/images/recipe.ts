import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { type Static, Type } from '@sinclair/typebox';
import { parse } from 'yaml';
import { inFile, ValidationError } from '../../../model/errors.ts';
import { parser } from '../../../model/validate.ts';
import { run } from '../exec.ts';
import { readLayout } from './oci-config.ts';
import { parseReference } from './reference.ts';
import { RecipeFiles, stageFiles } from './stages.ts';
import type { ImageStore, StoredImage } from './store.ts';

/**
 * A recipe for an image made of Debian packages (examples/images/*.yml): mmdebstrap installs
 * them from the configured Debian mirror into a root folder, with the recipe's own files
 * (./stages.ts), umoci makes it an OCI image with the recipe's config, and the store imports it or
 * it is written as an OCI archive (which `skopeo copy` pushes to any registry). No Docker daemon
 * or registry is involved.
 */
export const Recipe = Type.Object(
  {
    /** The image's name in the store, e.g. `debian:bookworm-slim`. */
    name: Type.String({ minLength: 1 }),
    /** Debian release. */
    suite: Type.Optional(Type.String({ pattern: '^[a-z][a-z0-9-]*$' })),
    /** mmdebstrap's variant: `minbase` (apt, dpkg, coreutils), `extract` (only the packages' files). */
    variant: Type.Optional(
      Type.Union([Type.Literal('minbase'), Type.Literal('essential'), Type.Literal('extract')]),
    ),
    packages: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z0-9][a-z0-9+.-]+$' }))),
    env: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), Type.String())),
    entrypoint: Type.Optional(Type.Array(Type.String())),
    cmd: Type.Optional(Type.Array(Type.String())),
    workingDir: Type.Optional(Type.String({ pattern: '^/' })),
    /** `uid`, `uid:gid`, `name` or `name:group`, as an image's User. */
    user: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?$' })),
    ...RecipeFiles,
  },
  { additionalProperties: false },
);
export type Recipe = Static<typeof Recipe>;

const recipeParser = parser(Recipe);

/** The recipe in `file` and the folder its `copy` paths are relative to; errors name the file and the field. */
export async function readRecipe(file: string): Promise<Recipe & { folder: string }> {
  let raw: unknown;
  try {
    raw = parse(await readFile(file, 'utf8'), { uniqueKeys: true });
  } catch (e) {
    throw new ValidationError([
      { path: file, message: `is not valid YAML: ${(e as Error).message.split('\n')[0]}` },
    ]);
  }
  try {
    const recipe = recipeParser.parse(raw);
    try {
      parseReference(recipe.name);
    } catch (e) {
      throw new ValidationError([{ path: 'name', message: (e as Error).message }]);
    }
    return { ...recipe, folder: dirname(file) };
  } catch (e) {
    throw e instanceof ValidationError ? inFile(e, file) : e;
  }
}

/** The umoci arguments that give the image the recipe's config. */
export function configArgs(recipe: Recipe): string[] {
  const args: string[] = [];
  for (const [key, value] of Object.entries(recipe.env ?? {})) args.push(`--config.env=${key}=${value}`);
  for (const part of recipe.entrypoint ?? []) args.push(`--config.entrypoint=${part}`);
  for (const part of recipe.cmd ?? []) args.push(`--config.cmd=${part}`);
  if (recipe.workingDir) args.push(`--config.workingdir=${recipe.workingDir}`);
  if (recipe.user) args.push(`--config.user=${recipe.user}`);
  return args;
}

/** Where a build puts its work and keeps what later builds reuse (./build-root.ts). */
export interface BuildFolders {
  tmp: string;
  cache: string;
}

/** Builds the recipe's image and imports it into the store under the recipe's name. */
export function buildImage(
  store: ImageStore,
  recipe: Recipe & { folder: string },
  cache: string,
): Promise<StoredImage> {
  return built({ tmp: join(store.dir, 'tmp'), cache }, recipe, (image) =>
    store.add(`oci:${image}`, recipe.name),
  );
}

/** Builds the recipe's image into an OCI archive named after the recipe; answers its manifest digest. */
export function buildArchive(
  folders: BuildFolders,
  recipe: Recipe & { folder: string },
  file: string,
): Promise<string> {
  return built(folders, recipe, async (image, layout) => {
    await run('skopeo', ['copy', '--quiet', `oci:${image}`, `oci-archive:${file}:${recipe.name}`]);
    return (await readLayout(layout)).digest;
  });
}

/** Builds the recipe's image as an OCI layout in a folder of `tmp` and hands it to `use`. */
async function built<T>(
  { tmp, cache }: BuildFolders,
  recipe: Recipe & { folder: string },
  use: (image: string, layout: string) => Promise<T>,
): Promise<T> {
  const work = await mkdtemp(join(tmp, 'build-'));
  try {
    const layout = join(work, 'oci');
    const image = `${layout}:image`;
    const bundle = join(work, 'bundle');
    const rootless = process.getuid?.() !== 0 ? ['--rootless'] : [];
    const files = await stageFiles(recipe, recipe.folder, work, cache);
    await run('umoci', ['init', '--layout', layout]);
    await run('umoci', ['new', '--image', image]);
    await run('umoci', ['unpack', ...rootless, '--image', image, bundle]);
    await run('mmdebstrap', [
      `--variant=${recipe.variant ?? 'minbase'}`,
      ...(recipe.packages?.length ? [`--include=${recipe.packages.join(',')}`] : []),
      // Documentation is of no use in a container; Debian's slim images leave it out too.
      '--dpkgopt=path-exclude=/usr/share/doc/*',
      '--dpkgopt=path-exclude=/usr/share/man/*',
      '--dpkgopt=path-exclude=/usr/share/locale/*',
      '--quiet',
      recipe.suite ?? 'bookworm',
      join(bundle, 'rootfs'),
    ]);
    // After mmdebstrap rather than in its hook, which the `extract` variant does not run.
    if (files) await cp(files, join(bundle, 'rootfs'), { recursive: true, verbatimSymlinks: true });
    await run('umoci', ['repack', ...rootless, '--image', image, bundle]);
    const config = configArgs(recipe);
    if (config.length > 0) await run('umoci', ['config', '--image', image, ...config]);
    return await use(image, layout);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
