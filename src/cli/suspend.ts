import type { Job } from '../model/job.ts';
import { clientFlags, parseClientCommand } from './args.ts';
import { CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { printJson } from './format.ts';
import { cliIo } from './io.ts';
import { resolveJobId } from './job-ids.ts';

// `suspend` and `resume`: UCloud's suspend and unsuspend, under the names Slurm users know from
// `scontrol suspend` / `scontrol resume`. The service decides which jobs may (409 otherwise; 402
// for an owner over its storage quota): the CLI says its answer, exit 1 as for every refusal.

export const SUSPEND_USAGE = `Usage: ucompute suspend ID... [options]

Suspends queued or running jobs: their processes are stopped and their machines freed, but each
job, its folder and its output stay. Charging and the job's clock stop while it is suspended.
"ucompute resume ID" puts it back in the queue; it then runs again from the start of its program.
ID may be any unique prefix of a job's id.

${CLIENT_OPTIONS_USAGE}`;

export const RESUME_USAGE = `Usage: ucompute resume ID... [options]

Puts suspended jobs back in the queue: the same jobs, with their folders and output. A job held
because its owner's storage quota is used up is refused (with what to delete) until there is room
again; it also goes back to the queue by itself within a minute once there is.
ID may be any unique prefix of a job's id.

${CLIENT_OPTIONS_USAGE}`;

/** The full ids of the jobs named on the command line. */
async function jobIds(
  argv: string[],
  usage: string,
): Promise<{ client: Client; ids: string[]; json: boolean } | undefined> {
  const { values, positionals, help } = parseClientCommand(argv, usage, {});
  if (help) return undefined;
  if (positionals.length === 0) throw new CliError(`expected at least one job ID\n\n${usage}`);
  const client = await connect(clientFlags(values));
  const ids: string[] = [];
  for (const text of positionals) ids.push(await resolveJobId(client, text));
  return { client, ids, json: values.json === true };
}

/** Asks the service for `path` on the jobs, then prints each job's state and latest word. */
async function act(argv: string[], usage: string, path: string): Promise<number> {
  const named = await jobIds(argv, usage);
  if (named === undefined) return 0;
  const { client, ids, json } = named;
  const response = await client.post<unknown>(path, { items: ids.map((id) => ({ id })) });
  if (json) {
    printJson(response);
    return 0;
  }
  for (const id of ids) {
    const job = await client.get<Job>('/api/jobs/retrieve', { id });
    const said = job.updates.findLast((u) => u.status !== undefined)?.status;
    cliIo().stdout.write(`${id}: ${job.status.state}${said !== undefined ? `, ${said}` : ''}\n`);
  }
  return 0;
}

export const suspendCommand = (argv: string[]) => act(argv, SUSPEND_USAGE, '/api/jobs/suspend');
export const resumeCommand = (argv: string[]) => act(argv, RESUME_USAGE, '/api/jobs/unsuspend');
