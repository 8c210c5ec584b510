import { useEffect, useState } from 'preact/hooks';
import { getJson } from './api.ts';
import type { FileEntry } from './types.ts';

/**
 * What a folder holds, read again when the folder or `version` changes; null until the first read.
 * A failed read leaves no entries and says why.
 */
export function useFolderListing(folder: string | null, version = 0) {
  const [entries, setEntries] = useState<FileEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (folder === null) return;
    setError(null);
    getJson<{ items: FileEntry[] }>('/api/files/browse', { path: folder, itemsPerPage: 1000 })
      .then((page) => setEntries(page.items))
      .catch((e: Error) => {
        setEntries([]);
        setError(e.message);
      });
  }, [folder, version]);
  return { entries, error };
}
