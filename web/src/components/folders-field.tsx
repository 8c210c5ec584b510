import { useState } from 'preact/hooks';
import { ErrorAlert } from './error-alert.tsx';
import { FilePicker } from './file-picker.tsx';

/** A folder the job mounts besides its own (UCloud's "additional folders"). */
export interface ChosenFolder {
  path: string;
  readOnly: boolean;
}

const mountPathOf = (path: string) => `/work/${path.slice(path.lastIndexOf('/') + 1)}`;

/**
 * The launch form's folders: where the workspace's drive appears in the job, and more folders of
 * any drive the user reaches, each read-only or not, each at /work/<its name>.
 */
export function FoldersField(props: {
  drive: string;
  folders: ChosenFolder[];
  error: string | undefined;
  onChange: (folders: ChosenFolder[]) => void;
}) {
  const [picking, setPicking] = useState(false);
  const { folders, onChange } = props;
  const change = (i: number, folder: ChosenFolder | null) =>
    onChange(
      folder === null ? folders.filter((_, j) => j !== i) : folders.map((f, j) => (j === i ? folder : f)),
    );
  return (
    <fieldset class={`folders${props.error ? ' invalid' : ''}`}>
      <legend>Folders</legend>
      <p class="hint">
        The job works in its own folder, <code>/work</code>. Your drive <code>{props.drive}</code> is there
        too, at <code>{mountPathOf(props.drive)}</code>; add more folders below, each at{' '}
        <code>/work/&lt;its name&gt;</code>.
      </p>
      {folders.length > 0 && (
        <ul class="chosen-folders">
          {folders.map((f, i) => (
            <li key={f.path}>
              <code>{f.path}</code> → <code>{mountPathOf(f.path)}</code>{' '}
              <label>
                <input
                  type="checkbox"
                  checked={f.readOnly}
                  onChange={(e) => change(i, { ...f, readOnly: e.currentTarget.checked })}
                />{' '}
                read-only
              </label>{' '}
              <button
                type="button"
                class="link"
                onClick={() => change(i, null)}
                aria-label={`Remove ${f.path}`}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <button type="button" onClick={() => setPicking(true)}>
        Add folder…
      </button>
      <ErrorAlert id="resources-error" message={props.error} />
      {picking && (
        <FilePicker
          kind="folder"
          onPick={(path) => {
            if (!folders.some((f) => f.path === path)) onChange([...folders, { path, readOnly: false }]);
            setPicking(false);
          }}
          onClose={() => setPicking(false)}
        />
      )}
    </fieldset>
  );
}
