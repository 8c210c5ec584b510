import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { formatBytes } from '../model/bytes.ts';
import { parentPath } from '../model/paths.ts';
import { clientFlags, parseClientCommand } from './args.ts';
import { ApiError, CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { formatTime, printJson, table } from './format.ts';
import { cliIo } from './io.ts';

/** `ucompute files ...`: the files of your drives (/home/<you>, /projects/<id>) on the service. */

export const FILES_USAGE = `Usage: ucompute files COMMAND [options]

The files of the drives you may reach: your home /home/<you> and /projects/<id> of your projects.
Paths are absolute; with --project (or $UCOMPUTE_PROJECT) a relative path starts at /projects/<id>.

Commands:
  ls PATH                 list a folder (or describe a file)
  put LOCAL PATH          upload a file (PATH may name a folder, or end with /, to put it in;
                          missing folders are made first; --resume continues a broken upload at the size the file
                          has on the service)
  get PATH [LOCAL]        download a file (LOCAL: a file, a folder, or - for standard output;
                          default: its name in the current folder; --resume continues a download)
  cat PATH                print a file
  mkdir PATH              make a folder (and any missing above it)
  mv FROM TO              move or rename (never over an existing name)
  cp FROM TO              copy a file or a folder (never over an existing name)
  rm PATH...              move to the drive's Trash folder
  empty-trash DRIVE       delete for good everything in the drive's Trash (DRIVE: /home/<you> or
                          /projects/<id>; the service also deletes what has been there for
                          storage.trashDays, 30 days by default)
  usage                   what each of your drives holds (its job folders and Trash included) and
                          its owner's storage quota (storage.quota, 100 GiB by default); at the
                          quota, uploads, new folders, copies and new jobs are refused (402), and
                          queued jobs are held (SUSPENDED) until the drive is below it again

Options:
  --resume                put/get: continue where a broken transfer stopped

Uploads of 16 MiB and more report their progress on standard error.

${CLIENT_OPTIONS_USAGE}`;

interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'folder' | 'link' | 'other';
  size: number;
  modifiedAt: number;
}

interface DriveUsage {
  drive: string;
  owner: string;
  usedBytes: number;
  quotaBytes: number | null;
  measuredAt: number;
}

function usageTable(items: DriveUsage[]): string {
  const rows = items.map((u) => [
    u.drive,
    u.owner,
    formatBytes(u.usedBytes),
    u.quotaBytes === null ? 'no limit' : formatBytes(u.quotaBytes),
    u.quotaBytes === null ? '-' : `${Math.floor((100 * u.usedBytes) / Math.max(u.quotaBytes, 1))}%`,
    formatTime(u.measuredAt),
  ]);
  return table(['DRIVE', 'OWNER', 'USED', 'QUOTA', 'USE', 'MEASURED'], rows);
}

const SHOW_PROGRESS_FROM = 16 * 1024 * 1024;
const PAGE = 1000;

/** Each files command's fewest and most arguments. */
const ARITY: Record<string, [number, number]> = {
  ls: [1, 1],
  put: [2, 2],
  get: [1, 2],
  cat: [1, 1],
  mkdir: [1, 1],
  mv: [2, 2],
  cp: [2, 2],
  rm: [1, Number.POSITIVE_INFINITY],
  'empty-trash': [1, 1],
  usage: [0, 0],
};

/** The files commands, for the shell's completion. */
export const FILES_COMMANDS = Object.keys(ARITY);

export async function filesCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, FILES_USAGE, {
    resume: { type: 'boolean' },
  });
  if (help) return 0;
  const [command, ...args] = positionals;
  if (command === undefined) throw new CliError(`which files command?\n\n${FILES_USAGE}`);
  const [least, most] = ARITY[command] ?? [];
  if (least === undefined || most === undefined) {
    throw new CliError(`unknown files command "${command}"\n\n${FILES_USAGE}`);
  }
  if (args.length < least || args.length > most) {
    throw new CliError(
      `files ${command} takes ${least === most ? least : `${least} or more`} arguments\n\n${FILES_USAGE}`,
    );
  }
  const client = await connect(clientFlags(values));
  const remote = (path: string) => inWorkspace(client, path);
  // Every argument but put's first (a local file) and get's second names a path on the service.
  const local = (i: number) => (command === 'put' && i === 0) || (command === 'get' && i === 1);
  const paths = args.map((a, i) => (local(i) ? a : remote(a)));
  const json = values.json === true;
  const resume = values.resume === true;
  const entry = (e: FileEntry) => (json ? printJson(e) : cliIo().stdout.write(`${e.path}\n`));

  switch (command) {
    case 'ls':
      await list(client, paths[0]!, json);
      return 0;
    case 'put':
      entry(await put(client, paths[0]!, paths[1]!, resume));
      return 0;
    case 'get':
      await get(client, paths[0]!, paths[1], resume);
      return 0;
    case 'cat':
      await download(client, paths[0]!, () => cliIo().stdout, 0);
      return 0;
    case 'mkdir':
      entry(await client.post<FileEntry>('/api/files/folder', { path: paths[0] }));
      return 0;
    case 'mv':
      entry(await client.post<FileEntry>('/api/files/move', { from: paths[0], to: paths[1] }));
      return 0;
    case 'cp':
      entry(await client.post<FileEntry>('/api/files/copy', { from: paths[0], to: paths[1] }));
      return 0;
    case 'empty-trash': {
      const emptied = await client.post<{ entries: number; bytes: number }>('/api/files/trash/empty', {
        drive: paths[0],
      });
      if (json) printJson(emptied);
      else
        cliIo().stdout.write(
          `emptied the Trash of ${paths[0]}: ${emptied.entries} entries, ${formatBytes(emptied.bytes)}\n`,
        );
      return 0;
    }
    case 'usage': {
      const { items } = await client.get<{ items: DriveUsage[] }>('/api/files/usage');
      if (json) printJson(items);
      else cliIo().stdout.write(usageTable(items));
      return 0;
    }
    default: // rm
      for (const path of paths) {
        const trashed = await client.post<FileEntry>('/api/files/trash', { path });
        if (json) printJson(trashed, true);
        else cliIo().stdout.write(`${path} -> ${trashed.path}\n`);
      }
      return 0;
  }
}

/**
 * A path on the service: absolute as given; relative to the workspace's drive (/projects/<id>)
 * with --project. A personal workspace's relative path is refused here: its drive's name is the
 * user's, which the token alone does not tell.
 */
function inWorkspace(client: Client, path: string): string {
  if (path.startsWith('/')) return path;
  if (client.project === undefined) {
    throw new CliError(
      `${path}: give a path in a drive, such as /home/<you>/${path} (relative paths need --project)`,
    );
  }
  return `/projects/${client.project}/${path}`;
}

async function list(client: Client, path: string, json: boolean): Promise<void> {
  const self = await client.get<FileEntry>('/api/files/stat', { path });
  let items = [self];
  if (self.type === 'folder') {
    items = [];
    let next: string | undefined;
    // Every page but the last is full, so the pages end; the bound only guards against a broken server.
    for (let page = 0; page < 1_000_000; page++) {
      const r = await client.get<{ items: FileEntry[]; next: string | null }>('/api/files/browse', {
        path,
        itemsPerPage: PAGE,
        next,
      });
      items.push(...r.items);
      if (r.next === null) break;
      next = r.next;
    }
  }
  if (json) {
    printJson({ items });
    return;
  }
  const rows = items.map((e) => [
    e.type === 'folder' ? `${e.name}/` : e.name,
    e.type,
    e.type === 'file' ? String(e.size) : '-',
    formatTime(e.modifiedAt),
  ]);
  cliIo().stdout.write(table(['NAME', 'TYPE', 'SIZE', 'MODIFIED'], rows));
}

/**
 * The remote path a local file goes to: into PATH when PATH is a folder, or ends with `/` (a
 * folder made if missing, as `cp FILE DIR/` would not: ucompute makes it in the same step).
 */
async function target(client: Client, local: string, remote: string): Promise<FileEntry | string> {
  if (remote.endsWith('/')) return target(client, local, `${remote.replace(/\/+$/, '')}/${basename(local)}`);
  const existing = await client.get<FileEntry>('/api/files/stat', { path: remote }).catch((e: unknown) => {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  });
  if (existing?.type === 'folder') {
    const inside = `${remote.replace(/\/+$/, '')}/${basename(local)}`;
    return client.get<FileEntry>('/api/files/stat', { path: inside }).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return inside;
      throw e;
    });
  }
  return existing ?? remote;
}

async function put(client: Client, local: string, remote: string, resume: boolean): Promise<FileEntry> {
  const size = (await stat(local)).size;
  const found = await target(client, local, remote);
  const path = typeof found === 'string' ? found : found.path;
  let offset = 0;
  if (resume && typeof found !== 'string') {
    if (found.size > size)
      throw new CliError(`--resume: ${path} is larger (${found.size} bytes) than ${local}`);
    offset = found.size;
  }
  // A new file's folder is made first, so that `put` into a new folder works in one step.
  if (typeof found === 'string') await client.post('/api/files/folder', { path: parentPath(path) });
  const content = createReadStream(local, { start: offset });
  const body = size >= SHOW_PROGRESS_FROM ? content.pipe(progress(`put ${path}`, offset, size)) : content;
  return (await client
    .bytes(
      'PUT',
      '/api/files/upload',
      { path, offset },
      {
        headers: { 'content-type': 'application/octet-stream' },
        body,
      },
    )
    .then((r) => r.json())) as FileEntry;
}

async function get(
  client: Client,
  remote: string,
  local: string | undefined,
  resume: boolean,
): Promise<void> {
  if (local === '-') {
    await download(client, remote, () => cliIo().stdout, 0);
    return;
  }
  let file = local ?? basename(remote);
  const existing = await stat(file).catch(() => undefined);
  if (existing?.isDirectory()) file = `${file}/${basename(remote)}`;
  const start = resume ? ((await stat(file).catch(() => undefined))?.size ?? 0) : 0;
  await download(client, remote, () => createWriteStream(file, start > 0 ? { flags: 'a' } : {}), start);
}

/** Streams the file from byte `start` into `out`, which is opened only once the service answered. */
async function download(client: Client, remote: string, out: () => Writable, start: number): Promise<void> {
  const response = await client
    .bytes(
      'GET',
      '/api/files/download',
      { path: remote },
      start > 0 ? { headers: { range: `bytes=${start}-` } } : {},
    )
    .catch((e: unknown) => {
      // Asking past the end of the file: the local copy is complete already.
      if (e instanceof ApiError && e.status === 416) return undefined;
      throw e;
    });
  if (!response?.body) return;
  await pipeline(Readable.fromWeb(response.body as never), out());
}

/** Passes bytes through and reports how far they are, on standard error. */
function progress(label: string, done: number, total: number): Transform {
  let sent = done;
  let shown = -1;
  const report = () => {
    const percent = Math.floor((sent / Math.max(total, 1)) * 100);
    if (percent === shown) return;
    shown = percent;
    const line = `${label}: ${percent}% (${mebibytes(sent)} of ${mebibytes(total)} MiB)`;
    // A terminal gets one line rewritten; a file or a pipe one line per percent.
    cliIo().stderr.write(cliIo().stderr.isTTY ? `\r${line}` : `${line}\n`);
  };
  report();
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      sent += chunk.length;
      report();
      callback(null, chunk);
    },
    flush(callback) {
      if (cliIo().stderr.isTTY) cliIo().stderr.write('\n');
      callback();
    },
  });
}

const mebibytes = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
