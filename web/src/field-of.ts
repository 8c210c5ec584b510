/** The form's own fields that the server's issues may name. */
const FORM_FIELDS = new Set(['product', 'timeAllocation', 'replicas', 'name', 'resources']);

/**
 * Where a server issue belongs on the launch form: `param:<name>` for a parameter, one of the
 * form's own fields, or `form`. Paths are the job's (`items[0].parameters.top`, from the request's
 * schema) or the prepared job's (`items[0].specification.parameters.top.value`).
 */
export function fieldOf(path: string): string {
  const [first, second] = path
    .replace(/^items\[\d+\]\.?/, '')
    .replace(/^specification\.?/, '')
    .split('.');
  if (first === 'parameters' && second !== undefined && second !== '')
    return `param:${second.replace(/\[.*$/, '')}`;
  const field = first?.replace(/\[.*$/, '') ?? '';
  return FORM_FIELDS.has(field) ? field : 'form';
}
