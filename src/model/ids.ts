import { randomFillSync } from 'node:crypto';

/**
 * Job ids are DNS-label safe (the Volcano Job is `j-<id>`, pods `j-<id>-job-<rank>`) and sort by
 * creation time: a base-36 millisecond clock followed by random base-36 digits.
 */
export const JOB_ID_PATTERN = '^[a-z0-9]{1,40}$';
const JOB_ID_REGEX = new RegExp(JOB_ID_PATTERN);

/**
 * Random bytes for ids, filled 1,024 ids at a time: one call for 5 bytes cost more than the rest
 * of the id (the 01:50 acceptance profile: 3.2 % of a replica's busy time at ~370 jobs/s).
 */
const RANDOM = Buffer.alloc(5 * 1024);
let used = RANDOM.length;

export function newJobId(now = Date.now()): string {
  if (used === RANDOM.length) {
    randomFillSync(RANDOM);
    used = 0;
  }
  const random = RANDOM.readUIntBE(used, 5).toString(36).padStart(8, '0');
  used += 5;
  return now.toString(36) + random;
}

export function isJobId(id: string): boolean {
  return JOB_ID_REGEX.test(id);
}
