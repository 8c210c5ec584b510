/** Image tarballs for the image store's tests, made here from Debian's busybox-static, no registry. */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/backends/local/exec.ts';

export interface BusyboxImage {
  /** The name written into the tarball (oci-archive's ref name), if any. */
  name?: string;
  env?: string[];
  entrypoint?: string[];
  cmd?: string[];
  workingDir?: string;
  user?: string;
}

const APPLETS = ['sh', 'env', 'pwd', 'cat', 'echo', 'id', 'ls', 'touch'];

/** The busybox binary of the busybox-static package. */
async function busyboxBinary(): Promise<string> {
  const files = (await run('dpkg-query', ['-L', 'busybox-static'])).split('\n');
  const binary = files.find((f) => f.endsWith('/bin/busybox'));
  if (!binary) throw new Error('busybox-static installs no /bin/busybox');
  return binary;
}

/**
 * An oci-archive tarball of a one-layer image: busybox with a few applet links, /etc/passwd with
 * root and `app` (1234:2345), the working folder; the config from `image`. Built with umoci,
 * exported with skopeo.
 */
export async function busyboxArchive(dir: string, image: BusyboxImage): Promise<string> {
  const layout = join(dir, 'oci');
  const bundle = join(dir, 'bundle');
  await run('umoci', ['init', '--layout', layout]);
  await run('umoci', ['new', '--image', `${layout}:image`]);
  await run('umoci', ['unpack', '--image', `${layout}:image`, bundle]);
  const rootfs = join(bundle, 'rootfs');
  await mkdir(join(rootfs, 'bin'), { recursive: true });
  await mkdir(join(rootfs, 'etc'));
  await run('cp', [await busyboxBinary(), join(rootfs, 'bin', 'busybox')]);
  for (const applet of APPLETS) await symlink('busybox', join(rootfs, 'bin', applet));
  await writeFile(
    join(rootfs, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345::/srv/app:/bin/sh\n',
  );
  await writeFile(join(rootfs, 'etc/group'), 'root:x:0:\nstaff:x:2345:\n');
  if (image.workingDir) await mkdir(join(rootfs, image.workingDir), { recursive: true });
  await run('umoci', ['repack', '--image', `${layout}:image`, bundle]);
  const config = [
    ...(image.env ?? []).map((e) => `--config.env=${e}`),
    ...(image.entrypoint ?? []).map((e) => `--config.entrypoint=${e}`),
    ...(image.cmd ?? []).map((c) => `--config.cmd=${c}`),
    ...(image.workingDir ? [`--config.workingdir=${image.workingDir}`] : []),
    ...(image.user ? [`--config.user=${image.user}`] : []),
  ];
  if (config.length > 0) await run('umoci', ['config', '--image', `${layout}:image`, ...config]);
  const archive = join(dir, 'image.tar');
  await run('skopeo', [
    'copy',
    '--quiet',
    `oci:${layout}:image`,
    `oci-archive:${archive}${image.name ? `:${image.name}` : ''}`,
  ]);
  return archive;
}
