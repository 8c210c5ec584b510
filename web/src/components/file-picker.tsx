import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { parentOf, userDrives } from '../drives.ts';
import { bytes } from '../format.ts';
import type { FileEntry } from '../types.ts';

interface Props {
  kind: 'file' | 'folder';
  /** Where to start: the folder of the current value, else the first drive. */
  start?: string;
  onPick: (path: string) => void;
  onClose: () => void;
}

/** A modal that browses the user's drives and answers one file or folder. */
export function FilePicker({ kind, start, onPick, onClose }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [drives, setDrives] = useState<string[]>([]);
  const [folder, setFolder] = useState<string | null>(null);
  const [entries, setEntries] = useState<FileEntry[]>([]);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    dialog.current?.showModal();
    void userDrives().then((found) => {
      setDrives(found);
      setFolder(
        start !== undefined && start !== ''
          ? kind === 'file'
            ? parentOf(start)
            : start
          : (found[0] ?? null),
      );
    });
  }, []);
  useEffect(() => {
    if (folder === null) return;
    setError(null);
    getJson<{ items: FileEntry[] }>('/api/files/browse', { path: folder, itemsPerPage: 1000 })
      .then((page) => setEntries(page.items))
      .catch((e: Error) => {
        setEntries([]);
        setError(e.message);
      });
  }, [folder]);

  const atDrive = folder !== null && drives.includes(folder);
  return (
    <dialog ref={dialog} class="picker" aria-labelledby="picker-title" onClose={onClose}>
      <h2 id="picker-title">Choose a {kind}</h2>
      <div class="toolbar">
        <label for="picker-drive">Drive</label>
        <select
          id="picker-drive"
          value={drives.find((d) => folder?.startsWith(d)) ?? ''}
          onChange={(e) => setFolder(e.currentTarget.value)}
        >
          {drives.map((d) => (
            <option key={d} value={d}>
              {d}
            </option>
          ))}
        </select>
      </div>
      <p class="path" aria-live="polite">
        {folder}
      </p>
      {error !== null && <p class="error">{error}</p>}
      <ul class="listing">
        {!atDrive && folder !== null && (
          <li>
            <button type="button" class="link" onClick={() => setFolder(parentOf(folder))}>
              ↑ Up
            </button>
          </li>
        )}
        {entries.map((entry) => (
          <li key={entry.path}>
            {entry.type === 'folder' ? (
              <button type="button" class="link" onClick={() => setFolder(entry.path)}>
                📁 {entry.name}
              </button>
            ) : (
              <button
                type="button"
                class="link"
                disabled={kind !== 'file'}
                onClick={() => onPick(entry.path)}
                aria-label={`Use ${entry.name}`}
              >
                📄 {entry.name} <span class="muted">{bytes(entry.size)}</span>
              </button>
            )}
          </li>
        ))}
        {entries.length === 0 && error === null && <li class="muted">This folder is empty.</li>}
      </ul>
      <div class="actions">
        {kind === 'folder' && folder !== null && (
          <button type="button" class="primary" onClick={() => onPick(folder)}>
            Use this folder
          </button>
        )}
        <button type="button" onClick={() => dialog.current?.close()}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}
