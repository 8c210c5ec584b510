import type { ContainerRoot } from '../runtime.ts';
import type { ImageConfig } from './oci-config.ts';
import type { ImageStore } from './store.ts';

/** What a container's image gives it: a root, and the image's config when it has one. */
export interface ResolvedImage {
  root: ContainerRoot;
  config: ImageConfig | null;
  /** Said in the job's updates: why the container runs on something other than its image. */
  notice: string | null;
}

/** Finds the root of a container's image; throws, naming the image, when it may not run. */
export type ImageResolver = (image: string) => Promise<ResolvedImage>;

export interface ImageSources {
  /** `local.images`: image name to a root folder, no config. Checked first. */
  folders: Readonly<Record<string, string>>;
  store: ImageStore | null;
  /** `local.hostUserland`: an image found nowhere runs on the host userland view, else it fails. */
  hostUserland: boolean;
}

export function imageResolver(sources: ImageSources): ImageResolver {
  return async (image) => {
    const folder = sources.folders[image];
    if (folder !== undefined) return { root: { kind: 'folder', path: folder }, config: null, notice: null };
    const stored = await sources.store?.find(image);
    if (stored) return { root: { kind: 'folder', path: stored.root }, config: stored.config, notice: null };
    if (sources.hostUserland) {
      return {
        root: { kind: 'host-view' },
        config: null,
        notice: `Image ${image} is not in the local image store; running on the host's userland view`,
      };
    }
    throw new Error(
      `image ${image} is not in the local image store (and local.hostUserland is off): ` +
        `add it with \`ucompute images import FILE --name ${image}\` (or images pull / images build)`,
    );
  };
}
