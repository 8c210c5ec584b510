import { appendFile, readFile, rename, writeFile } from 'node:fs/promises';

/**
 * The network namespaces one instance created and has not deleted yet, in a file of its state
 * folder: each is written down before it is created and struck out once deleted, so after a crash
 * the instance removes exactly its own leftovers and never another's.
 */
export interface NamespaceJournal {
  /** Written before the namespaces are created. */
  created(names: readonly string[]): Promise<void>;
  /** Written once they are deleted. */
  deleted(names: readonly string[]): Promise<void>;
  /** Namespaces created and not deleted, by this and earlier processes. */
  outstanding(): Promise<Set<string>>;
  /** Rewrites the file to hold only `names` (those still in use). */
  compact(names: readonly string[]): Promise<void>;
}

/** Lines `+name` (created) and `-name` (deleted), appended. */
export function namespaceJournal(file: string): NamespaceJournal {
  const lines = (sign: string, names: readonly string[]) => names.map((n) => `${sign}${n}\n`).join('');
  // One append after the other: a deletion is never written before the creation it follows.
  let writing = Promise.resolve();
  const append = (text: string) => {
    const done = writing.then(() => appendFile(file, text, { mode: 0o600 }));
    writing = done.catch(() => undefined);
    return done;
  };
  return {
    created: (names) => (names.length > 0 ? append(lines('+', names)) : Promise.resolve()),
    deleted: (names) => (names.length > 0 ? append(lines('-', names)) : Promise.resolve()),
    async outstanding() {
      await writing;
      const names = new Set<string>();
      for (const line of (await readFile(file, 'utf8').catch(() => '')).split('\n')) {
        if (line.startsWith('+')) names.add(line.slice(1));
        if (line.startsWith('-')) names.delete(line.slice(1));
      }
      return names;
    },
    async compact(names) {
      await writing;
      await writeFile(`${file}.new`, lines('+', names), { mode: 0o600 });
      await rename(`${file}.new`, file);
    },
  };
}
