import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../exec.ts';
import { type ImageConfig, readLayout } from './oci-config.ts';
import { canonical, familiar, type ImageReference, parseReference } from './reference.ts';

/**
 * The local image store, `<dataDir>/images` (0700): images copied by skopeo from a registry or an
 * archive into an OCI layout, unpacked ONCE by umoci (which keeps every layer's paths and links
 * inside the root folder) and shared read-only by every pod that runs them.
 *
 *   names/<encoded name>    the image id (manifest digest) a name points at; one file per name,
 *                           replaced by rename, so concurrent imports need no lock
 *   <hex>/image.json        what `ls` shows and the config containers run with
 *   <hex>/bundle/rootfs     the unpacked root folder
 *   tmp/                    imports under way
 */

export interface StoredImage {
  /** `debian:bookworm-slim`. */
  name: string;
  /** The manifest digest, `sha256:…`. */
  id: string;
  /** Bytes of the unpacked root folder. */
  size: number;
  created: string | null;
  config: ImageConfig;
  /** The unpacked root folder. */
  root: string;
}

interface ImageRecord {
  id: string;
  size: number;
  created: string | null;
  config: ImageConfig;
}

export interface ImageStore {
  readonly dir: string;
  /** Copies an image from any skopeo source (`oci:…`, `docker://…`) into the store as `name`. */
  add(source: string, name: string): Promise<StoredImage>;
  /** A docker-archive or oci-archive tarball; its own name unless `name` is given. */
  importArchive(file: string, name?: string): Promise<StoredImage>;
  /** From a registry, by skopeo. */
  pull(reference: string): Promise<StoredImage>;
  list(): Promise<StoredImage[]>;
  /** The image a container names, or null when the store does not have it (or it is no reference). */
  find(reference: string): Promise<StoredImage | null>;
  /** Removes the name; the image goes with its last name. */
  remove(reference: string): Promise<void>;
}

export const imageStoreDir = (dataDir: string) => join(dataDir, 'images');

const hexOf = (id: string) => id.slice(id.indexOf(':') + 1);
const nameFile = (name: string) => encodeURIComponent(name);

/**
 * The store in `dir`, created if missing: names and work in progress private (0700); the store and
 * each image's folders passable, not listable (0711), since bubblewrap binds an image's root folder
 * by path as the container's unprivileged host user.
 */
export async function openImageStore(dir: string): Promise<ImageStore> {
  await mkdir(join(dir, 'names'), { recursive: true, mode: 0o700 });
  await mkdir(join(dir, 'tmp'), { recursive: true, mode: 0o700 });
  await chmod(dir, 0o711);
  const rootless = process.getuid?.() !== 0;

  async function record(id: string): Promise<ImageRecord | null> {
    try {
      return JSON.parse(await readFile(join(dir, hexOf(id), 'image.json'), 'utf8')) as ImageRecord;
    } catch {
      return null;
    }
  }

  const stored = (name: string, r: ImageRecord): StoredImage => ({
    name: familiar(parseReference(name)),
    id: r.id,
    size: r.size,
    created: r.created,
    config: r.config,
    root: join(dir, hexOf(r.id), 'bundle', 'rootfs'),
  });

  async function idOf(name: string): Promise<string | null> {
    try {
      return (await readFile(join(dir, 'names', nameFile(name)), 'utf8')).trim();
    } catch {
      return null;
    }
  }

  async function add(source: string, name: string): Promise<StoredImage> {
    const full = canonical(parseReference(name));
    const work = await mkdtemp(join(dir, 'tmp', 'import-'));
    try {
      const layout = join(work, 'oci');
      await run('skopeo', ['copy', '--quiet', source, `oci:${layout}:image`]);
      const image = await readLayout(layout);
      if (!(await record(image.digest))) {
        const unpacked = join(work, 'image');
        await mkdir(unpacked, { mode: 0o700 });
        await run('umoci', [
          'unpack',
          ...(rootless ? ['--rootless'] : []),
          '--image',
          `${layout}:image`,
          join(unpacked, 'bundle'),
        ]);
        const size = Number((await run('du', ['-sb', join(unpacked, 'bundle', 'rootfs')])).split('\t')[0]);
        const r: ImageRecord = { id: image.digest, size, created: image.created, config: image.config };
        await writeFile(join(unpacked, 'image.json'), JSON.stringify(r));
        for (const folder of [unpacked, join(unpacked, 'bundle')]) await chmod(folder, 0o711);
        // Another import of the same image may have finished meanwhile; its copy is as good.
        await rename(unpacked, join(dir, hexOf(image.digest))).catch(async (e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
        });
      }
      const temporary = join(work, 'name');
      await writeFile(temporary, `${image.digest}\n`);
      await rename(temporary, join(dir, 'names', nameFile(full)));
      return stored(full, (await record(image.digest))!);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  return {
    dir,
    add,
    async importArchive(file, name) {
      const info = await stat(file);
      if (!info.isFile()) throw new Error(`${file} is not a file`);
      const archive = await archiveOf(file);
      const chosen = name ?? archive.name;
      if (!chosen) {
        throw new Error(`${file} carries no image name; give one with --name NAME:TAG`);
      }
      parseReference(chosen);
      return add(`${archive.transport}:${file}`, chosen);
    },
    async pull(reference) {
      const ref = parseReference(reference);
      try {
        return await add(`docker://${canonical(ref)}`, reference);
      } catch (e) {
        throw new Error(`could not pull ${familiar(ref)}: ${toolMessage((e as Error).message)}`);
      }
    },
    async list() {
      const images: StoredImage[] = [];
      for (const file of (await readdir(join(dir, 'names'))).sort()) {
        const name = decodeURIComponent(file);
        const id = await idOf(name);
        const r = id ? await record(id) : null;
        if (r) images.push(stored(name, r));
      }
      return images;
    },
    async find(reference) {
      let ref: ImageReference;
      try {
        ref = parseReference(reference);
      } catch {
        return null;
      }
      const full = canonical(ref);
      // A digest names the image itself, whatever name it was imported under (as a registry would).
      const id = ref.digest?.startsWith('sha256:') ? ref.digest.toLowerCase() : await idOf(full);
      const r = id ? await record(id) : null;
      return r ? stored(full, r) : null;
    },
    async remove(reference) {
      const full = canonical(parseReference(reference));
      const id = await idOf(full);
      if (!id) throw new Error(`there is no image ${reference} in the local image store`);
      await rm(join(dir, 'names', nameFile(full)));
      const others = await Promise.all(
        (await readdir(join(dir, 'names'))).map((f) => idOf(decodeURIComponent(f))),
      );
      if (!others.includes(id)) await rm(join(dir, hexOf(id)), { recursive: true, force: true });
    },
  };
}

/** What skopeo said (its `msg="…"`), without the command line around it. */
function toolMessage(error: string): string {
  const said = /msg="((?:[^"\\]|\\.)*)"/.exec(error)?.[1];
  return said ? said.replaceAll('\\"', '"') : (error.trim().split('\n').at(-1) ?? error);
}

/** Which skopeo transport reads the tarball, and the name it carries, if any. */
async function archiveOf(
  file: string,
): Promise<{ transport: 'docker-archive' | 'oci-archive'; name: string | null }> {
  const entries = new Set((await run('tar', ['-tf', file])).split('\n').map((e) => e.replace(/^\.\//, '')));
  if (entries.has('oci-layout')) {
    const index = JSON.parse(await tarEntry(file, 'index.json'));
    const annotations = index.manifests?.[0]?.annotations ?? {};
    const name = annotations['io.containerd.image.name'] ?? annotations['org.opencontainers.image.ref.name'];
    // An OCI ref name is often a bare tag ("latest"): a name only when it reads as a full reference.
    return { transport: 'oci-archive', name: typeof name === 'string' && /[/:]/.test(name) ? name : null };
  }
  if (entries.has('manifest.json')) {
    const manifest = JSON.parse(await tarEntry(file, 'manifest.json'));
    const tag = manifest?.[0]?.RepoTags?.[0];
    return { transport: 'docker-archive', name: typeof tag === 'string' ? tag : null };
  }
  throw new Error(`${file} is neither a docker-archive nor an oci-archive tarball`);
}

/** One file of a tarball, read to memory (tar writes it to stdout, nothing to disk). */
async function tarEntry(file: string, entry: string): Promise<string> {
  return run('tar', ['-xOf', file, entry]).catch(() => run('tar', ['-xOf', file, `./${entry}`]));
}
