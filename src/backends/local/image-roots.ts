import { createHash } from 'node:crypto';
import { mkdir, readdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';
import { PERL, programPath } from './programs.ts';

/**
 * Images' root folders as one owner's containers see them. An image's files belong to the ids of
 * its layers (root's, mostly); an owner's containers run on the owner's host id range. As with
 * runc and Kubernetes' `hostUsers: false`, each owner gets a read-only idmapped mount of the image
 * where those ids are the owner's (file uid U shows as host id base+U): container root owns the
 * image's /root, so it can read it, and the sandbox can build mount points below it.
 */
export interface ImageRoots {
  /** The folder to run `rootfs` from for the owner whose range starts at `base`. */
  rootFor(rootfs: string, base: number): Promise<string>;
  /** Unmounts them (running containers keep their own copies of the mounts). */
  close(): Promise<void>;
}

/**
 * Mounts in `dir` (in the state folder; 0711, as bubblewrap passes through it as the container's
 * user); `userns(base)` opens the owner's user namespace. Mounts a crashed process left are
 * removed. Where the file system cannot idmap, images run with their own ids (their private
 * folders stay closed to containers) and `unsupported` is told why, once.
 */
export async function imageRoots(
  dir: string,
  userns: (base: number) => Promise<string>,
  unsupported: (why: string) => void,
): Promise<ImageRoots> {
  await mkdir(dir, { recursive: true, mode: 0o711 });
  for (const name of await readdir(dir)) {
    await run('/usr/bin/umount', ['--lazy', join(dir, name)]).catch(() => undefined);
    await rmdir(join(dir, name)).catch(() => undefined);
  }
  let idmaps = true;
  const mount = async (rootfs: string, target: string, base: number) => {
    if (!idmaps) return rootfs;
    await mkdir(target, { mode: 0o755 });
    try {
      await run(PERL, [programPath('idmapped-mount.pl'), await userns(base), rootfs, target]);
      return target;
    } catch (error) {
      await rmdir(target).catch(() => undefined);
      idmaps = false;
      unsupported((error as Error).message.trim());
      return rootfs;
    }
  };
  const unmount = async (target: string) => {
    await run('/usr/bin/umount', ['--lazy', target]).catch(() => undefined);
    await rmdir(target).catch(() => undefined);
  };
  const mounts = new Map<string, Promise<string>>();
  return {
    rootFor(rootfs, base) {
      const target = join(dir, `${createHash('sha256').update(rootfs).digest('hex').slice(0, 16)}-${base}`);
      let made = mounts.get(target);
      if (!made) {
        made = mount(rootfs, target, base);
        mounts.set(target, made);
      }
      return made;
    },
    async close() {
      for (const [target, made] of mounts) if ((await made) === target) await unmount(target);
      mounts.clear();
    },
  };
}
