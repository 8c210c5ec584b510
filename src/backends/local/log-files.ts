import { open, stat } from 'node:fs/promises';

/**
 * Reading a container's rotated output files (`<file>.<n>` … `<file>.1`, then `<file>`, oldest
 * first, as the supervisor's writer leaves them) in bounded chunks: a reader holds at most one
 * chunk in memory however large the log, and follows the files across rotations by inode.
 */

/** The most a reader takes at once: memory stays bounded for any number of readers. */
export const LOG_CHUNK_BYTES = 64 * 1024;

export interface LogPart {
  path: string;
  ino: number;
  size: number;
}

/** Where a reader stands: the file (by inode, which a rotation keeps) and the offset in it. */
export interface LogCursor {
  ino: number;
  offset: number;
}

/** The kept files of one stream, oldest first; those missing (not yet written, or rotating) are left out. */
export async function logParts(file: string, maxFiles: number): Promise<LogPart[]> {
  const paths = [...Array.from({ length: maxFiles - 1 }, (_, i) => `${file}.${maxFiles - 1 - i}`), file];
  const parts = await Promise.all(
    paths.map(async (path) => {
      const s = await stat(path).catch(() => undefined);
      return s?.isFile() ? { path, ino: s.ino, size: s.size } : undefined;
    }),
  );
  return parts.filter((p) => p !== undefined);
}

/**
 * The next bytes after `cursor` (null: from the oldest kept byte), read into `buffer` (a reader
 * reuses one: the bytes returned are valid until its next call); null when there is nothing new.
 * A cursor whose file was rotated away continues at the oldest kept file.
 */
export async function readLogChunk(
  file: string,
  maxFiles: number,
  cursor: LogCursor | null,
  buffer: Buffer,
): Promise<{ bytes: Buffer; cursor: LogCursor } | null> {
  // A follower polls (every 100 ms): a cursor in the current file (a rotation gives the name a
  // new inode) at its end has nothing new, told by one stat instead of the kept parts' stats and
  // an open, fstat and close (~1 % of a core of serve per followed job's streams).
  if (cursor) {
    const current = await stat(file).catch(() => undefined);
    if (current?.isFile() && current.ino === cursor.ino && current.size <= cursor.offset) return null;
  }
  const parts = await logParts(file, maxFiles);
  let index = cursor ? parts.findIndex((p) => p.ino === cursor.ino) : 0;
  let offset = cursor && index >= 0 ? cursor.offset : 0;
  if (index < 0) index = 0;
  for (; index < parts.length; index++, offset = 0) {
    const part = parts[index]!;
    const bytes = await readAt(part.path, part.ino, offset, buffer);
    if (bytes && bytes.length > 0) return { bytes, cursor: { ino: part.ino, offset: offset + bytes.length } };
  }
  return null;
}

/** Up to a buffer's worth from `offset` of the file, if it is still the one with inode `ino`. */
async function readAt(path: string, ino: number, offset: number, buffer: Buffer): Promise<Buffer | null> {
  const handle = await open(path, 'r').catch(() => undefined);
  if (!handle) return null;
  try {
    const s = await handle.stat();
    if (s.ino !== ino || s.size <= offset) return null;
    const length = Math.min(buffer.length, s.size - offset);
    const { bytesRead } = await handle.read(buffer, 0, length, offset);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
