import { useEffect, useRef, useState } from 'preact/hooks';
import { postJson } from '../api.ts';
import { ConfirmDialog, FieldDialog } from '../components/dialog.tsx';
import { DriveSelect } from '../components/drive-select.tsx';
import { DriveUsageLine } from '../components/drive-usage.tsx';
import { ErrorAlert } from '../components/error-alert.tsx';
import { joinPath, parentOf, userDrives } from '../drives.ts';
import { useFolderListing } from '../folder-listing.ts';
import { formatBytes, when } from '../format.ts';
import { navigate, queryOf } from '../router.tsx';
import type { FileEntry } from '../types.ts';
import { uploadFile } from '../upload.ts';

interface Upload {
  key: number;
  name: string;
  size: number;
  sent: number;
  error?: string;
}

let uploadCount = 0;

/** The dialog open on the page, if any: what it asks, and for which entry. */
type Asking =
  | { kind: EntryAction; entry: FileEntry }
  | { kind: 'new-folder'; folder: string }
  | { kind: 'empty-trash'; drive: string }
  | null;

type EntryAction = 'rename' | 'move' | 'trash';

/** The buttons on each row, in order. */
const ENTRY_ACTIONS: readonly { kind: EntryAction; label: string; danger?: boolean }[] = [
  { kind: 'rename', label: 'Rename' },
  { kind: 'move', label: 'Move' },
  { kind: 'trash', label: 'Delete', danger: true },
];

/** The user's drives: browse, upload (drag and drop, large files), download, new folder, rename, move, delete. */
export function FilesPage() {
  const [drives, setDrives] = useState<string[]>([]);
  const folder = queryOf().get('path') ?? drives[0] ?? null;
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [dragging, setDragging] = useState(false);
  const [version, setVersion] = useState(0);
  const [asking, setAsking] = useState<Asking>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  useEffect(() => {
    void userDrives().then(setDrives);
  }, []);
  const { entries, error } = useFolderListing(folder, version);

  const go = (path: string) => navigate(`/files?path=${encodeURIComponent(path)}`);
  const reload = () => setVersion((v) => v + 1);
  /** A change asked for in a dialog: the listing is read again once it is done. */
  const change = async (path: string, body: unknown) => {
    await postJson(path, body);
    reload();
  };

  const upload = async (files: FileList | File[]) => {
    if (folder === null) return;
    for (const file of Array.from(files)) {
      const key = ++uploadCount;
      const track = (change: Partial<Upload>) =>
        setUploads((all) => all.map((u) => (u.key === key ? { ...u, ...change } : u)));
      setUploads((all) => [...all, { key, name: file.name, size: file.size, sent: 0 }]);
      try {
        await uploadFile(file, joinPath(folder, file.name), (sent) => track({ sent }));
      } catch (e) {
        track({ error: (e as Error).message });
      }
      reload();
    }
  };

  const close = () => setAsking(null);
  const dialog = (() => {
    if (asking === null) return null;
    if (asking.kind === 'new-folder')
      return (
        <FieldDialog
          title="New folder"
          label={`Name of the new folder in ${asking.folder}`}
          action="Create folder"
          onSubmit={(name) => change('/api/files/folder', { path: joinPath(asking.folder, name) })}
          onClose={close}
        />
      );
    if (asking.kind === 'empty-trash')
      return (
        <ConfirmDialog
          title={`Empty the trash of ${asking.drive}?`}
          action="Delete for good"
          onConfirm={() => change('/api/files/trash/empty', { drive: asking.drive })}
          onClose={close}
        >
          <p>Everything in it is deleted for good.</p>
        </ConfirmDialog>
      );
    const { entry } = asking;
    if (asking.kind === 'rename')
      return (
        <FieldDialog
          title={`Rename ${entry.name}`}
          label="New name"
          initial={entry.name}
          action="Rename"
          onSubmit={async (name) => {
            if (name !== entry.name)
              await change('/api/files/move', { from: entry.path, to: joinPath(parentOf(entry.path), name) });
          }}
          onClose={close}
        />
      );
    if (asking.kind === 'move')
      return (
        <FieldDialog
          title={`Move ${entry.name}`}
          label="New path (a full path, with the name)"
          initial={entry.path}
          action="Move"
          onSubmit={async (to) => {
            if (to !== entry.path) await change('/api/files/move', { from: entry.path, to });
          }}
          onClose={close}
        />
      );
    return (
      <ConfirmDialog
        title={`Delete ${entry.name}?`}
        action="Move to the trash"
        onConfirm={() => change('/api/files/trash', { path: entry.path })}
        onClose={close}
      >
        <p>It is moved to the drive's trash.</p>
      </ConfirmDialog>
    );
  })();

  const atDrive = folder !== null && drives.includes(folder);
  /** The drive whose Trash folder this is, when it is one. */
  const trashOf = drives.find((d) => folder === joinPath(d, 'Trash'));
  // Dropping files is a shortcut for the "Upload files" button, which the keyboard reaches.
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a drop zone; the upload button does the same
    <section
      class={`files${dragging ? ' dragging' : ''}`}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        if (e.dataTransfer?.files) void upload(e.dataTransfer.files);
      }}
    >
      <h1>Files</h1>
      <div class="toolbar">
        <label>
          Drive <DriveSelect drives={drives} folder={folder} onChange={go} />
        </label>
        <button type="button" onClick={() => folder !== null && setAsking({ kind: 'new-folder', folder })}>
          New folder
        </button>
        <button type="button" onClick={() => fileInput.current?.click()}>
          Upload files
        </button>
        {trashOf !== undefined && (
          <button
            type="button"
            class="danger"
            onClick={() => setAsking({ kind: 'empty-trash', drive: trashOf })}
          >
            Empty trash
          </button>
        )}
        <input
          ref={fileInput}
          type="file"
          multiple
          class="visually-hidden"
          aria-label="Files to upload"
          onChange={(e) => {
            const files = e.currentTarget.files;
            if (files) void upload(Array.from(files));
            e.currentTarget.value = '';
          }}
        />
      </div>
      <p class="path">
        {folder}
        {!atDrive && folder !== null && (
          <>
            {' '}
            <button type="button" class="link" onClick={() => go(parentOf(folder))}>
              ↑ Up
            </button>
          </>
        )}
      </p>
      <DriveUsageLine drive={drives.find((d) => folder?.startsWith(d))} version={version} />
      <p class="hint">Drop files here to upload them into this folder.</p>
      {uploads.length > 0 && (
        <ul class="uploads" aria-label="Uploads">
          {uploads.map((u) => (
            <li key={u.key}>
              {u.name}{' '}
              <progress
                max={u.size || 1}
                value={u.size === 0 ? 1 : u.sent}
                aria-label={`Upload of ${u.name}`}
              />{' '}
              {u.error !== undefined ? (
                <span class="error">{u.error}</span>
              ) : (
                <span class="muted">
                  {u.sent >= u.size ? 'done' : `${formatBytes(u.sent)} of ${formatBytes(u.size)}`}
                </span>
              )}
            </li>
          ))}
        </ul>
      )}
      <ErrorAlert message={error} />
      {entries !== null && (
        <table class="file-table" aria-label="Files">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col" class="wide">
                Size
              </th>
              <th scope="col" class="wide">
                Modified
              </th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.path}>
                <td>
                  {e.type === 'folder' ? (
                    <button type="button" class="link" onClick={() => go(e.path)}>
                      📁 {e.name}
                    </button>
                  ) : (
                    <a href={`/api/files/download?path=${encodeURIComponent(e.path)}`} download={e.name}>
                      {e.name}
                    </a>
                  )}
                </td>
                <td class="wide">{e.type === 'file' ? formatBytes(e.size) : ''}</td>
                <td class="wide">{when(e.modifiedAt)}</td>
                <td class="row-actions">
                  {ENTRY_ACTIONS.map((a) => (
                    <button
                      key={a.kind}
                      type="button"
                      class={a.danger ? 'small danger' : 'small'}
                      onClick={() => setAsking({ kind: a.kind, entry: e })}
                      aria-label={`${a.label} ${e.name}`}
                    >
                      {a.label}
                    </button>
                  ))}
                </td>
              </tr>
            ))}
            {entries.length === 0 && error === null && (
              <tr>
                <td colSpan={4} class="muted">
                  This folder is empty.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      {dialog}
    </section>
  );
}
