/**
 * What plugins (at creation) and backends (saving logs at the end) may do in a job's storage;
 * absent when only planning. Paths are drive paths (`/home/alice/x`).
 */
export interface JobStorage {
  ensureFolder(path: string): Promise<void>;
  writeFile(path: string, content: string): Promise<void>;
  /**
   * ensureFolder, then writeFile of each of `files` (names in that folder), as one step: off the
   * event loop where the storage can (./directory.ts). Idempotent like the two.
   */
  makeFolderWith?(path: string, files: { name: string; content: string }[]): Promise<void>;
}

/**
 * What a drive path holds, as seen from its drive: `outside` when a symlink on the way leads out
 * of the drive.
 */
export type EntryKind = 'file' | 'folder' | 'other' | 'missing' | 'outside';

/** What intake asks of storage to check a job's inputs at submit; it never creates anything. */
export interface InputStorage {
  entryKind(path: string, drive: string): Promise<EntryKind>;
}
