import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The part of an OCI image's configuration that says how its containers run. */
export interface ImageConfig {
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  User?: string;
}

/** The manifest and configuration of the one image in an OCI layout folder. */
export async function readLayout(
  layout: string,
): Promise<{ digest: string; created: string | null; layersBytes: number; config: ImageConfig }> {
  const blob = async (digest: string) => {
    const [algorithm, hex] = digest.split(':');
    if (!algorithm || !hex || !/^[a-z0-9]+$/.test(algorithm) || !/^[a-f0-9]+$/.test(hex))
      throw new Error(`the OCI layout names a malformed digest ${digest}`);
    return JSON.parse(await readFile(join(layout, 'blobs', algorithm, hex), 'utf8'));
  };
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
  const descriptor = index.manifests?.[0];
  if (!descriptor?.digest) throw new Error('the OCI layout holds no image');
  const manifest = await blob(descriptor.digest);
  const image = await blob(manifest.config.digest);
  const layers: { size: number }[] = manifest.layers ?? [];
  return {
    digest: descriptor.digest,
    created: typeof image.created === 'string' ? image.created : null,
    layersBytes: layers.reduce((sum, l) => sum + (l.size ?? 0), 0),
    config: pickConfig(image.config ?? {}),
  };
}

function pickConfig(c: Record<string, unknown>): ImageConfig {
  const strings = (v: unknown) => (Array.isArray(v) && v.every((s) => typeof s === 'string') ? v : undefined);
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const picked: ImageConfig = {};
  const env = strings(c.Env);
  const entrypoint = strings(c.Entrypoint);
  const cmd = strings(c.Cmd);
  const workingDir = text(c.WorkingDir);
  const user = text(c.User);
  if (env) picked.Env = env;
  if (entrypoint) picked.Entrypoint = entrypoint;
  if (cmd) picked.Cmd = cmd;
  if (workingDir) picked.WorkingDir = workingDir;
  if (user) picked.User = user;
  return picked;
}

/** `KEY=VALUE` entries as a record; a later entry wins, as in a process environment. */
export function imageEnv(config: ImageConfig): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of config.Env ?? []) {
    const at = entry.indexOf('=');
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/**
 * The argv as Kubernetes makes it from the container and its image: `command` replaces the
 * entrypoint and drops the image's Cmd; `args` replace the Cmd. Both already expanded.
 */
export function imageArgv(
  config: ImageConfig,
  command: readonly string[],
  args: readonly string[],
): string[] {
  if (command.length > 0) return [...command, ...args];
  return [...(config.Entrypoint ?? []), ...(args.length > 0 ? args : (config.Cmd ?? []))];
}

export interface UserRequest {
  runAsUser: number | undefined;
  runAsGroup: number | undefined;
}

/**
 * The uid and gid a container runs as: `runAsUser`/`runAsGroup` win over the image's `User`
 * (`uid`, `uid:gid`, `name` or `name:group`, names read from the image's own /etc/passwd and
 * /etc/group); a uid without a group takes its primary group from the image's passwd, else 0.
 */
export async function imageUser(
  root: string,
  config: ImageConfig,
  request: UserRequest,
): Promise<{ uid: number; gid: number }> {
  let uid = request.runAsUser;
  let gid = request.runAsGroup;
  const [user, group] = uid === undefined && config.User ? splitUser(config.User) : [undefined, undefined];
  if (user !== undefined) uid = isId(user) ? Number(user) : await idOf(root, 'passwd', user, config.User!);
  if (gid === undefined && group !== undefined) {
    gid = isId(group) ? Number(group) : await idOf(root, 'group', group, config.User!);
  }
  uid ??= 0;
  if (gid === undefined) gid = (await primaryGroup(root, uid)) ?? 0;
  return { uid, gid };
}

function splitUser(user: string): [string, string | undefined] {
  const at = user.indexOf(':');
  return at < 0 ? [user, undefined] : [user.slice(0, at), user.slice(at + 1)];
}

const isId = (s: string) => /^[0-9]{1,10}$/.test(s) && Number(s) <= 0xffffffff;

async function idOf(root: string, file: 'passwd' | 'group', name: string, user: string): Promise<number> {
  const entry = entriesOf(root, file).find((fields) => fields[0] === name);
  const id = entry?.[2];
  if (id === undefined || !isId(id)) {
    throw new Error(
      `the image's User "${user}": no ${file === 'passwd' ? 'user' : 'group'} ${name} in its /etc/${file}`,
    );
  }
  return Number(id);
}

async function primaryGroup(root: string, uid: number): Promise<number | null> {
  const entry = entriesOf(root, 'passwd').find((fields) => fields[2] === String(uid));
  return entry?.[3] !== undefined && isId(entry[3]) ? Number(entry[3]) : null;
}

/**
 * The lines of the image's /etc/passwd or /etc/group, split on ':'; none when it has no such
 * file. Neither /etc nor the file may be a symlink: an image's link could point at a host file.
 */
function entriesOf(root: string, file: 'passwd' | 'group'): string[][] {
  // Read for every container's start: synchronous, as the pods' small files are (pod/pod.ts).
  try {
    if (!lstatSync(join(root, 'etc')).isDirectory()) return [];
  } catch {
    return [];
  }
  let fd: number;
  try {
    fd = openSync(join(root, 'etc', file), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return [];
  }
  try {
    if (!fstatSync(fd).isFile()) return [];
    return readFileSync(fd, 'utf8')
      .split('\n')
      .map((line) => line.split(':'));
  } finally {
    closeSync(fd);
  }
}
