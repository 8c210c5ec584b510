import { randomBytes } from 'node:crypto';

/**
 * Job ids are DNS-label safe (the Volcano Job is `j-<id>`, pods `j-<id>-job-<rank>`) and sort by
 * creation time: a base-36 millisecond clock followed by random base-36 digits.
 */
export const JOB_ID_PATTERN = '^[a-z0-9]{1,40}$';
const JOB_ID_REGEX = new RegExp(JOB_ID_PATTERN);

export function newJobId(now = Date.now()): string {
  const random = randomBytes(5).readUIntBE(0, 5).toString(36).padStart(8, '0');
  return now.toString(36) + random;
}

export function isJobId(id: string): boolean {
  return JOB_ID_REGEX.test(id);
}
