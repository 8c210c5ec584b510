import { useState } from 'preact/hooks';
import type { RawValue } from '../parameter-values.ts';
import type { Job, Parameter } from '../types.ts';
import { ErrorAlert } from './error-alert.tsx';
import { FilePicker } from './file-picker.tsx';

interface Props {
  parameter: Parameter;
  raw: RawValue;
  error?: string;
  peers: Job[];
  onChange: (raw: RawValue) => void;
}

/** One parameter's control, labelled, with its description, its unit and range, and the server's complaint. */
export function ParameterField({ parameter: p, raw, error, peers, onChange }: Props) {
  const [picking, setPicking] = useState(false);
  const id = `param-${p.name}`;
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  const range =
    (p.type === 'integer' || p.type === 'floating_point') && (p.min !== undefined || p.max !== undefined)
      ? ` (${p.min ?? '…'} to ${p.max ?? '…'}${p.unitName !== undefined ? ` ${p.unitName}` : ''})`
      : '';
  const hasHint = p.description !== '' || range !== '';
  const described = [hasHint ? hintId : '', error !== undefined ? errorId : ''].filter(Boolean).join(' ');
  const common = {
    id,
    name: p.name,
    'aria-invalid': error !== undefined,
    'aria-describedby': described === '' ? undefined : described,
    'aria-required': !p.optional,
  };
  const onInput = (e: Event) => onChange((e.currentTarget as HTMLInputElement).value);

  let control: preact.JSX.Element;
  switch (p.type) {
    case 'input_file':
    case 'input_directory':
      control = (
        <div class="with-button">
          <input
            {...common}
            type="text"
            value={raw}
            onInput={onInput}
            placeholder="/home/…"
            spellcheck={false}
          />
          <button type="button" onClick={() => setPicking(true)}>
            Browse…
          </button>
          {picking && (
            <FilePicker
              kind={p.type === 'input_file' ? 'file' : 'folder'}
              start={raw}
              onPick={(path) => {
                onChange(path);
                setPicking(false);
              }}
              onClose={() => setPicking(false)}
            />
          )}
        </div>
      );
      break;
    case 'boolean':
      control = (
        <select {...common} value={raw} onChange={onInput}>
          {p.optional && <option value="">(not set)</option>}
          <option value="true">Yes</option>
          <option value="false">No</option>
        </select>
      );
      break;
    case 'integer':
    case 'floating_point':
      control = (
        <div class="with-unit">
          <input
            {...common}
            type="number"
            inputMode={p.type === 'integer' ? 'numeric' : 'decimal'}
            value={raw}
            min={p.min}
            max={p.max}
            step={p.step ?? (p.type === 'integer' ? 1 : 'any')}
            onInput={onInput}
          />
          {p.unitName !== undefined && <span class="unit">{p.unitName}</span>}
        </div>
      );
      break;
    case 'textarea':
      control = <textarea {...common} rows={5} value={raw} onInput={onInput} />;
      break;
    case 'workflow':
      control = (
        <textarea
          {...common}
          class="code"
          rows={12}
          value={raw}
          onInput={onInput}
          spellcheck={false}
          placeholder="The job script (Jinja), run after the application's own"
        />
      );
      break;
    case 'enumeration':
      control = (
        <select {...common} value={raw} onChange={onInput}>
          <option value="">{p.optional ? '(not set)' : 'Choose…'}</option>
          {p.options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.name}
            </option>
          ))}
        </select>
      );
      break;
    case 'peer': {
      const suggested = p.suggestedApplication;
      const sorted = [...peers].sort(
        (a, b) =>
          Number(b.specification.application.name === suggested) -
          Number(a.specification.application.name === suggested),
      );
      control = (
        <select {...common} value={raw} onChange={onInput}>
          <option value="">
            {sorted.length === 0 ? 'No running job to connect to' : 'Choose a running job…'}
          </option>
          {sorted.map((j) => (
            <option key={j.id} value={j.id}>
              {j.specification.name ?? j.id} ({j.specification.application.name})
            </option>
          ))}
        </select>
      );
      break;
    }
    default:
      control = <input {...common} type="text" value={raw} onInput={onInput} />;
  }

  return (
    <div class={`field${error !== undefined ? ' invalid' : ''}`}>
      <label for={id}>
        {p.title || p.name}
        {!p.optional && (
          <span class="required" title="required">
            {' '}
            *
          </span>
        )}
      </label>
      {control}
      {hasHint && (
        <p id={hintId} class="hint">
          {p.description}
          {range}
        </p>
      )}
      <ErrorAlert id={errorId} message={error} />
    </div>
  );
}
