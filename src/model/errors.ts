/** One problem with an input, located by a dotted path ("specification.parameters.count"). */
export interface Issue {
  path: string;
  message: string;
}

/** The one error type for bad input: every caller can rely on `issues` naming the field. */
export class ValidationError extends Error {
  readonly issues: Issue[];

  constructor(issues: Issue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ValidationError';
    this.issues = issues;
  }
}

export function formatIssue(issue: Issue): string {
  return issue.path ? `${issue.path}: ${issue.message}` : issue.message;
}

export function joinPath(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  return base ? `${base}.${key}` : key;
}

/** Collects issues while walking an input, then throws them all at once. */
export class IssueList {
  readonly issues: Issue[] = [];

  add(path: string, message: string): void {
    this.issues.push({ path, message });
  }

  addAll(issues: readonly Issue[]): void {
    this.issues.push(...issues);
  }

  throwIfAny(): void {
    if (this.issues.length > 0) throw new ValidationError(this.issues);
  }
}

/** The same error, its paths prefixed by the file they came from. */
export function inFile(error: ValidationError, file: string): ValidationError {
  return new ValidationError(error.issues.map((i) => ({ ...i, path: i.path ? `${file}: ${i.path}` : file })));
}
