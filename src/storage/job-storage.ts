/**
 * What plugins (at creation) and backends (saving logs at the end) may do in a job's storage;
 * absent when only planning. Paths are drive paths (`/home/alice/x`).
 */
export interface JobStorage {
  ensureFolder(path: string): Promise<void>;
  writeFile(path: string, content: string): Promise<void>;
}
