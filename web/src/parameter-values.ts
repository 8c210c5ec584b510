import type { Parameter, ParameterValue } from './types.ts';

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
    case 'workflow':
      return d.specification.job ?? '';
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
    case 'workflow':
      return { type: 'workflow', specification: { job: raw } };
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
