import { isJobId } from '../model/ids.ts';
import type { Job } from '../model/job.ts';
import type { Client } from './client.ts';
import { CliError } from './errors.ts';

/** Candidates listed when a prefix is ambiguous; one more is fetched to know there are more. */
const CANDIDATES_SHOWN = 10;
const LONGEST_ID = 40;

/**
 * The job whose id is `text` or starts with it, as `git` reads a short commit id. Jobs come newest
 * first in descending id order, so a page that starts just above every id with this prefix holds
 * the matches first: one request however many jobs there are.
 */
export async function resolveJobId(client: Client, text: string): Promise<string> {
  if (!isJobId(text)) throw new CliError(`"${text}" is not a job id (lower-case letters and digits)`);
  if (text.length === LONGEST_ID) return text;
  const page = await client.get<{ items: Job[] }>('/api/jobs/browse', {
    itemsPerPage: CANDIDATES_SHOWN + 1,
    next: text.padEnd(LONGEST_ID, 'z'),
  });
  const matches = page.items.map((j) => j.id).filter((id) => id.startsWith(text));
  if (matches.includes(text)) return text;
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) throw new CliError(`job ${text} was not found`, 1);
  const more = matches.length > CANDIDATES_SHOWN ? ', ...' : '';
  throw new CliError(
    `job id prefix ${text} is ambiguous: it matches ${matches.slice(0, CANDIDATES_SHOWN).join(', ')}${more}`,
  );
}
