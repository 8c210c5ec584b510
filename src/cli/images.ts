import { join, resolve } from 'node:path';
import { buildArchive, buildImage, readRecipe } from '../backends/local/images/recipe.ts';
import { parseReference } from '../backends/local/images/reference.ts';
import {
  type ImageStore,
  imageStoreDir,
  openImageStore,
  type StoredImage,
} from '../backends/local/images/store.ts';
import { formatBytes } from '../model/bytes.ts';
import { parseCommandLine } from './args.ts';
import { loadConfig } from './config-file.ts';
import { defaultCacheDir, defaultDataDir } from './defaults.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const IMAGES_USAGE = `Usage: ucompute images COMMAND [options]

The local backend's image store, in <data-dir>/images: images are unpacked once and shared
read-only by every pod that runs them. It works on the data folder directly (the one \`serve\`
uses), not through the service.

Commands:
  ls                    name, id, size and creation time of every image
  import FILE           a docker-archive (\`docker save\`) or oci-archive tarball; --name NAME:TAG
                        names it (needed when the tarball carries no name)
  pull REF              from a registry, with skopeo
  build RECIPE.yml      from Debian packages with mmdebstrap (see examples/images); with
                        --oci-archive FILE written there instead (an OCI archive, which
                        \`skopeo copy oci-archive:FILE docker://REGISTRY/NAME\` pushes). A build
                        stage's Debian root is kept a day in $XDG_CACHE_HOME/ucompute/build-roots
                        (else ~/.cache/ucompute/build-roots) and reused
  rm NAME...            removes names; an image goes with its last name

Options:
  --data-dir DIR        data folder (default: the configuration's, else $UCOMPUTE_DATA_DIR,
                        /var/lib/ucompute as root, else ~/.local/share/ucompute)
  --config FILE         ucompute configuration (its dataDir applies)`;

export async function imagesCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseCommandLine(
    argv,
    {
      'data-dir': { type: 'string' },
      config: { type: 'string' },
      name: { type: 'string' },
      'oci-archive': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    IMAGES_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${IMAGES_USAGE}\n`);
    return 0;
  }
  const [command, ...rest] = positionals;
  const one = () => {
    if (rest.length !== 1) throw new CliError(`images ${command} takes one argument\n\n${IMAGES_USAGE}`);
    return rest[0]!;
  };
  if (values.name !== undefined && command !== 'import')
    throw new CliError('--name is an option of images import');
  if (values['oci-archive'] !== undefined && command !== 'build')
    throw new CliError('--oci-archive is an option of images build');
  const config = await loadConfig(values.config);
  const dataDir = resolve(values['data-dir'] ?? config.dataDir ?? defaultDataDir());
  const store = () => openImageStore(imageStoreDir(dataDir));
  switch (command) {
    case 'ls':
      if (rest.length > 0) throw new CliError('images ls takes no arguments');
      cliIo().stdout.write(table(await (await store()).list()));
      return 0;
    case 'import': {
      const file = one();
      if (values.name !== undefined) reference('--name', values.name);
      return said(await attempt((s) => s.importArchive(file, values.name), store));
    }
    case 'pull': {
      const ref = reference('REF', one());
      return said(await attempt((s) => s.pull(ref), store));
    }
    case 'build': {
      const recipe = await readRecipe(one());
      const archive = values['oci-archive'];
      const cache = join(defaultCacheDir(), 'build-roots');
      if (archive === undefined) return said(await attempt((s) => buildImage(s, recipe, cache), store));
      const digest = await attempt(
        async (s) => buildArchive({ tmp: join(s.dir, 'tmp'), cache }, recipe, resolve(archive)),
        store,
      );
      cliIo().stdout.write(`${recipe.name} ${digest} ${archive}\n`);
      return 0;
    }
    case 'rm': {
      if (rest.length === 0) throw new CliError('images rm takes the names to remove');
      const s = await store();
      for (const name of rest) {
        await s.remove(name).catch((e: Error) => {
          throw new CliError(e.message, 1);
        });
        cliIo().stdout.write(`removed ${name}\n`);
      }
      return 0;
    }
    default:
      throw new CliError(command ? `unknown images command "${command}"\n\n${IMAGES_USAGE}` : IMAGES_USAGE);
  }
}

/** A name given on the command line, checked before anything is touched. */
function reference(what: string, text: string): string {
  try {
    parseReference(text);
    return text;
  } catch (e) {
    throw new CliError(`${what}: ${(e as Error).message}`);
  }
}

/** Runs a store operation; its failure (a tool's error, a bad name) is an error for people. */
async function attempt<T>(
  operation: (store: ImageStore) => Promise<T>,
  store: () => Promise<ImageStore>,
): Promise<T> {
  try {
    return await operation(await store());
  } catch (e) {
    throw new CliError((e as Error).message, 1);
  }
}

function said(image: StoredImage): number {
  cliIo().stdout.write(`${image.name} ${image.id}\n`);
  return 0;
}

function table(images: StoredImage[]): string {
  const rows = [
    ['NAME', 'ID', 'SIZE', 'CREATED'],
    ...images.map((i) => [
      i.name,
      i.id.replace(/^sha256:/, '').slice(0, 12),
      formatBytes(i.size),
      i.created ?? '-',
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map(
      (r) =>
        `${r
          .map((cell, c) => cell.padEnd(widths[c]!))
          .join('  ')
          .trimEnd()}\n`,
    )
    .join('');
}
