// A job specification as UCloud's clients write it, read into ucompute's (strict) JobSpecification:
// a tolerant reader in front of a strict writer. Shapes: UCloud's
// frontend-web/webclient/app/UCloud/JobsApi.tsx (`JobSpecification`), Applications/Jobs/Create.tsx
// (what the web client submits) and provider-integration/shared/pkg/orchestrators/jobs.go.

/** Fields UCloud's clients send that have no meaning here: dropped, and reported as ignored. */
const IGNORED_FIELDS = ['hostname', 'labels'] as const;

/** Fields where UCloud's Go core treats an empty value (null, or "" for `omitempty` text) as absent. */
const EMPTY_MEANS_ABSENT: Readonly<Record<string, (v: unknown) => boolean>> = {
  name: (v) => v === null || v === '',
  openedFile: (v) => v === null || v === '',
  parameters: (v) => v === null,
  resources: (v) => v === null,
  replicas: (v) => v === null,
};

export interface ReadSpecification {
  /** The specification to validate strictly (unknown fields and bad values are still refused). */
  specification: unknown;
  /** Paths of fields that were read but have no effect here, for a debug log line. */
  ignored: string[];
}

/**
 * Reads one item of `POST /api/jobs`. Anything that is not an object is passed on unchanged, so
 * that the strict validation explains what is wrong with it.
 */
export function readJobSpecification(raw: unknown): ReadSpecification {
  if (!isObject(raw)) return { specification: raw, ignored: [] };
  const ignored: string[] = [];
  const spec: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    if ((IGNORED_FIELDS as readonly string[]).includes(key)) {
      if (value !== null && value !== undefined) ignored.push(key);
      continue;
    }
    if (EMPTY_MEANS_ABSENT[key]?.(value)) continue;
    spec[key] = value;
  }
  // The web client sends the application's whole metadata (title, description, authors, ...).
  if (isObject(spec.application)) {
    const { name, version, ...rest } = spec.application;
    for (const key of Object.keys(rest)) ignored.push(`application.${key}`);
    spec.application = { name, version };
  }
  if (isObject(spec.timeAllocation)) spec.timeAllocation = normalisedDuration(spec.timeAllocation);
  return { specification: spec, ignored };
}

/**
 * `{minutes: 90}` as `{hours: 1, minutes: 30, seconds: 0}`, as UCloud's SimpleDuration does with
 * its total; anything but non-negative whole numbers is left for validation to refuse.
 */
export function normalisedDuration(d: Record<string, unknown>): Record<string, unknown> {
  const parts = [d.hours ?? 0, d.minutes ?? 0, d.seconds ?? 0];
  const keys = Object.keys(d).filter((k) => k !== 'hours' && k !== 'minutes' && k !== 'seconds');
  if (keys.length > 0 || !parts.every((p) => Number.isSafeInteger(p) && (p as number) >= 0)) return d;
  const [h, m, s] = parts as number[];
  const total = (h! * 60 + m!) * 60 + s!;
  return { hours: Math.floor(total / 3600), minutes: Math.floor(total / 60) % 60, seconds: total % 60 };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
