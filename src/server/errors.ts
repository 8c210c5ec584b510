import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { FastifyError, FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';
import { insufficientStorage, isDiskFull, ServiceError } from '../jobs/errors.ts';
import { formatIssue, type Issue, joinPath, ValidationError } from '../model/errors.ts';
import { parser } from '../model/validate.ts';
import type { ErrorBody } from './schemas.ts';

// How requests are checked and how failures become answers.

/**
 * Validates with the model's own compiled TypeBox checks (the schemas are TypeBox 0.34; the
 * published TypeBox compiler targets TypeBox 1), compiled once per route at startup. A failure
 * is explained by the same code as the service's own ValidationErrors, so messages agree.
 */
export const compileValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const checked = parser(schema);
  // Query strings arrive as text: "10" must count as the integer 10.
  const convert = httpPart === 'querystring' || httpPart === 'params';
  return (data: unknown) => {
    const value = convert ? Value.Convert(schema, data) : data;
    if (checked.check(value)) return convert ? { value } : {};
    return {
      error: checked.issues(value).map(
        (issue): FastifySchemaValidationError => ({
          keyword: 'schema',
          instancePath: pathToPointer(issue.path),
          schemaPath: '#',
          params: { path: issue.path },
          message: issue.message,
        }),
      ),
    };
  };
};

/** `items[0].product.id` → `/items/0/product/id`: Ajv's form, for anything that reads `instancePath`. */
function pathToPointer(path: string): string {
  if (path === '') return '';
  return `/${path
    .replace(/\[(\d+)\]/g, '.$1')
    .split('.')
    .filter((s) => s !== '')
    .map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1'))
    .join('/')}`;
}

/** Ajv's `/items/0/product/id` → `items[0].product.id`. */
export function instancePathToPath(pointer: string): string {
  let path = '';
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path = /^\d+$/.test(key) ? joinPath(path, Number(key)) : joinPath(path, key);
  }
  return path;
}

function validationIssues(error: FastifyError): Issue[] {
  const context = (error as { validationContext?: string }).validationContext ?? 'body';
  return (error.validation ?? []).map((e) => {
    let path = typeof e.params?.path === 'string' ? e.params.path : instancePathToPath(e.instancePath);
    // Ajv reports a missing property at its parent.
    if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = joinPath(path, e.params.missingProperty);
    }
    return { path: path || context, message: e.message ?? 'is not valid' };
  });
}

const ERROR_CODES: Readonly<Record<number, string>> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  402: 'PAYMENT_REQUIRED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  426: 'UPGRADE_REQUIRED',
  500: 'INTERNAL_ERROR',
  507: 'INSUFFICIENT_STORAGE',
};

/** UCloud's error shape (`why`, `errorCode`), with `message` for older clients and our `issues`. */
export function errorBody(status: number, why: string, issues?: Issue[]): ErrorBody {
  const errorCode = ERROR_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST');
  return { why, errorCode, message: why, ...(issues !== undefined ? { issues } : {}) };
}

/** What a failure becomes on the wire: never a stack trace, and 500 only for the unexpected. */
export function errorResponse(error: FastifyError): { status: number; body: ErrorBody } {
  if (error.validation) {
    const issues = validationIssues(error);
    return { status: 400, body: errorBody(400, issues.map(formatIssue).join('; '), issues) };
  }
  if (error instanceof ValidationError) {
    return { status: 400, body: errorBody(400, error.issues.map(formatIssue).join('; '), error.issues) };
  }
  if (error instanceof ServiceError)
    return { status: error.status, body: errorBody(error.status, error.message) };
  // Every write is a transaction, so a full disk left the store as it was: say so, not 500.
  if (isDiskFull(error)) {
    const full = insufficientStorage();
    return { status: full.status, body: errorBody(full.status, full.message) };
  }
  // Fastify's own refusals (bad JSON, wrong content type, body too large) are safe to repeat.
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && error.code?.startsWith('FST_')) {
    return { status, body: errorBody(status, error.message) };
  }
  return { status: 500, body: errorBody(500, 'internal error (the server log has the details)') };
}
