import { useEffect, useRef, useState } from 'preact/hooks';
import { parentOf, userDrives } from '../drives.ts';
import { useFolderListing } from '../folder-listing.ts';
import { formatBytes } from '../format.ts';
import { DialogActions } from './dialog.tsx';
import { DriveSelect } from './drive-select.tsx';

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
  const listing = useFolderListing(folder);
  const { error } = listing;
  const entries = listing.entries ?? [];

  const atDrive = folder !== null && drives.includes(folder);
  return (
    <dialog ref={dialog} class="picker" aria-labelledby="picker-title" onClose={onClose}>
      <h2 id="picker-title">Choose a {kind}</h2>
      <div class="toolbar">
        <label for="picker-drive">Drive</label>
        <DriveSelect id="picker-drive" drives={drives} folder={folder} onChange={setFolder} />
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
                📄 {entry.name} <span class="muted">{formatBytes(entry.size)}</span>
              </button>
            )}
          </li>
        ))}
        {entries.length === 0 && error === null && <li class="muted">This folder is empty.</li>}
      </ul>
      <DialogActions dialog={dialog}>
        {kind === 'folder' && folder !== null && (
          <button type="button" class="primary" onClick={() => onPick(folder)}>
            Use this folder
          </button>
        )}
      </DialogActions>
    </dialog>
  );
}
