/**
 * Image references as Docker and Kubernetes read them (distribution's reference grammar):
 * `[domain[:port]/]path[:tag][@digest]`, where a name without a domain lives on docker.io and a
 * one-part docker.io name under `library/`, and a reference without tag or digest means `:latest`.
 */

export interface ImageReference {
  /** `docker.io/library/debian`. */
  repository: string;
  tag: string | null;
  digest: string | null;
}

const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_PART = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(
  `^(?:(${DOMAIN})/)?(${COMPONENT}(?:/${COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`,
);
const MAX_NAME = 255;

/** The reference `text` names, normalized; throws a message for people when it is not one. */
export function parseReference(text: string): ImageReference {
  const match = REFERENCE.exec(text);
  if (!match) {
    throw new Error(
      `"${text}" is not a valid image reference (e.g. debian:bookworm-slim or ghcr.io/org/tool:1.2)`,
    );
  }
  let [, domain, path, tag, digest] = match as unknown as [string, string?, string?, string?, string?];
  // The first part is a domain only when it looks like one; `library/debian` is a path.
  if (domain !== undefined && !domain.includes('.') && !domain.includes(':') && domain !== 'localhost') {
    if (domain !== domain.toLowerCase())
      throw new Error(`"${text}" is not a valid image reference: repository names are lower case`);
    path = `${domain}/${path}`;
    domain = undefined;
  }
  domain ??= 'docker.io';
  if (domain === 'docker.io' && !path!.includes('/')) path = `library/${path}`;
  const repository = `${domain}/${path}`;
  if (repository.length > MAX_NAME)
    throw new Error(`"${text}" is not a valid image reference: the name is longer than ${MAX_NAME}`);
  return { repository, tag: tag ?? (digest ? null : 'latest'), digest: digest ?? null };
}

/** The full normalized form: `docker.io/library/debian:bookworm-slim`. */
export function canonical(ref: ImageReference): string {
  return `${ref.repository}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/** The short form people write: `debian:bookworm-slim`, `ghcr.io/org/tool:1.2`. */
export function familiar(ref: ImageReference): string {
  const short = ref.repository.replace(/^docker\.io\/(library\/)?/, '');
  return `${short}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}
