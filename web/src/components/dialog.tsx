import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ErrorAlert } from './error-alert.tsx';

// The interface's own modal dialogs instead of the browser's prompt() and confirm(): a <dialog>
// opened with showModal() keeps focus inside it and closes on Escape; focus goes back to what
// opened it. The page shows one while it is open, and drops it on `onClose`.

/** Opens the dialog as it mounts; gives focus back to the element that had it when it unmounts. */
function useModal() {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    dialog.current?.showModal();
    return () => opener?.focus();
  }, []);
  return dialog;
}

/** Runs the dialog's action: closes it when done, or keeps it open with the server's message. */
function useAction(dialog: { current: HTMLDialogElement | null }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
      dialog.current?.close();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run };
}

/** A dialog's buttons: its own (the children), then Cancel, which closes it. */
export function DialogActions(props: {
  dialog: { current: HTMLDialogElement | null };
  children: ComponentChildren;
}) {
  return (
    <div class="actions">
      {props.children}
      <button type="button" onClick={() => props.dialog.current?.close()}>
        Cancel
      </button>
    </div>
  );
}

/** A modal form with one labelled text field; what the server refuses is shown at the field. */
export function FieldDialog(props: {
  title: string;
  label: string;
  initial?: string;
  /** The submit button's text. */
  action: string;
  /** Called with the field's value; a rejection keeps the dialog open with its message. */
  onSubmit: (value: string) => Promise<unknown>;
  onClose: () => void;
}) {
  const dialog = useModal();
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [value, setValue] = useState(props.initial ?? '');
  const { error, busy, run } = useAction(dialog);
  useEffect(() => input.current?.select(), []);
  return (
    <dialog ref={dialog} aria-labelledby={`${id}-title`} onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(() => props.onSubmit(value.trim()));
        }}
      >
        <h2 id={`${id}-title`}>{props.title}</h2>
        <div class={`field${error !== null ? ' invalid' : ''}`}>
          <label for={`${id}-field`}>{props.label}</label>
          <input
            ref={input}
            id={`${id}-field`}
            value={value}
            required
            aria-invalid={error !== null}
            aria-describedby={error !== null ? `${id}-error` : undefined}
            onInput={(e) => setValue(e.currentTarget.value)}
          />
          <ErrorAlert id={`${id}-error`} message={error} />
        </div>
        <DialogActions dialog={dialog}>
          <button type="submit" class="primary" disabled={busy}>
            {props.action}
          </button>
        </DialogActions>
      </form>
    </dialog>
  );
}

/** A modal question with a dangerous answer; what the server refuses is shown in it. */
export function ConfirmDialog(props: {
  title: string;
  children: ComponentChildren;
  /** The confirming button's text. */
  action: string;
  onConfirm: () => Promise<unknown>;
  onClose: () => void;
}) {
  const dialog = useModal();
  const id = useId();
  const { error, busy, run } = useAction(dialog);
  return (
    <dialog ref={dialog} aria-labelledby={`${id}-title`} onClose={props.onClose}>
      <h2 id={`${id}-title`}>{props.title}</h2>
      {props.children}
      <ErrorAlert message={error} />
      <DialogActions dialog={dialog}>
        <button type="button" class="danger" disabled={busy} onClick={() => void run(props.onConfirm)}>
          {props.action}
        </button>
      </DialogActions>
    </dialog>
  );
}
