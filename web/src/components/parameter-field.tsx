import { useState } from 'preact/hooks';
import type { Job, Parameter, ParameterValue } from '../types.ts';
import { ErrorAlert } from './error-alert.tsx';
import { FilePicker } from './file-picker.tsx';

/** What the form holds for one parameter: text as typed (numbers too), '' for no value. */
export type RawValue = string;

/** The form's starting text for a parameter: its default, or nothing. */
export function initialRaw(parameter: Parameter): RawValue {
  const d = parameter.defaultValue;
  if (d === undefined) return '';
  switch (d.type) {
    case 'file':
      return d.path;
    case 'boolean':
    case 'integer':
    case 'floating_point':
    case 'text':
    case 'textarea':
      return String(d.value);
    case 'peer':
      return d.jobId;
    default:
      return d.id;
  }
}

/**
 * The value the API takes for what was typed, or undefined for none. What does not parse is sent
 * as typed, so that the server's check names the field and says why.
 */
export function parameterValue(parameter: Parameter, raw: RawValue): ParameterValue | undefined {
  if (raw === '') return undefined;
  switch (parameter.type) {
    case 'input_file':
    case 'input_directory':
      return { type: 'file', path: raw };
    case 'boolean':
      return { type: 'boolean', value: raw === 'true' };
    case 'integer':
    case 'floating_point': {
      const n = Number(raw);
      return { type: parameter.type, value: Number.isFinite(n) ? n : (raw as unknown as number) };
    }
    case 'text':
    case 'enumeration':
      return { type: 'text', value: raw };
    case 'textarea':
      return { type: 'textarea', value: raw };
    case 'peer': {
      return { type: 'peer', jobId: raw, hostname: peerHostname(parameter.name) };
    }
    case 'license_server':
      return { type: 'license_server', id: raw };
    case 'network_ip':
      return { type: 'network', id: raw };
    case 'ingress':
      return { type: 'ingress', id: raw };
  }
}

/** The name the job will reach its peer by: the parameter's own name, as UCloud's form proposes. */
function peerHostname(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .replace(/^-+|-+$/g, '') || 'peer'
  );
}

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
