import { ADMIN_DIRECTORY_COMMANDS, ADMIN_DIRECTORY_USAGE, adminDirectoryCommand } from './admin-directory.ts';
import { clientFlags, type OptionValues, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { DATE_FORMS, formatUtc, parseDate } from './dates.ts';
import { CliError } from './errors.ts';
import { printJson } from './format.ts';
import { cliIo } from './io.ts';
import { didYouMean } from './suggest.ts';

/** `ucompute admin ...`: the administrators' calls (users, projects, members, credits, tokens) with flags. */

const ROLES = ['PI', 'ADMIN', 'USER'];

export const ADMIN_USAGE = `Usage: ucompute admin COMMAND [options]

Administration (the token must be an administrator's):
  admin user NAME [--admin]                      create a user (--admin: an administrator)
  admin project ID [--title TITLE]               create a project (the title defaults to ID)
  admin member PROJECT USER [--role ROLE]        add USER to PROJECT, or change their role:
                                                 ${ROLES.join(', ')} (default USER)
  admin grant (--user NAME | --project ID) --category CATEGORY --credits N
              [--start DATE] [--end DATE]        give credits in a product category (see
                                                 \`ucompute products\`), valid from --start (now)
                                                 to --end (a year later)
  admin token USER [--description TEXT]          make an API token for USER; prints only the token
${ADMIN_DIRECTORY_USAGE}

DATE: ${DATE_FORMS}.

${CLIENT_OPTIONS_USAGE}`;

const SUBCOMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  user: adminUser,
  project: adminProject,
  member: adminMember,
  grant: adminGrant,
  token: adminToken,
};

/** The administrators' commands, for the shell's completion. */
export const ADMIN_COMMANDS = [...Object.keys(SUBCOMMANDS), ...ADMIN_DIRECTORY_COMMANDS];

export async function adminCommand(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    cliIo().stdout.write(`${ADMIN_USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const run = SUBCOMMANDS[name] ?? adminDirectoryCommand(name, ADMIN_USAGE);
  if (!run) {
    throw new CliError(
      `unknown admin command "${name}"${didYouMean(name, ADMIN_COMMANDS)}\n\n${ADMIN_USAGE}`,
    );
  }
  return run(rest);
}

function positionalsExactly(positionals: string[], names: string[]): string[] {
  if (positionals.length !== names.length) {
    throw new CliError(`expected ${names.join(' and ')}\n\n${ADMIN_USAGE}`);
  }
  return positionals;
}

/** Prints the response as JSON with --json, else the sentence. */
function report(values: OptionValues, response: unknown, sentence: string): number {
  if (values.json === true) printJson(response);
  else cliIo().stdout.write(`${sentence}\n`);
  return 0;
}

async function adminUser(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, ADMIN_USAGE, { admin: { type: 'boolean' } });
  if (help) return 0;
  const [name] = positionalsExactly(positionals, ['a user NAME']);
  const admin = values.admin === true;
  const client = await connect(clientFlags(values));
  const response = await client.post<{ name: string; admin: boolean }>('/api/admin/users', { name, admin });
  return report(values, response, `user ${response.name} created${response.admin ? ' (administrator)' : ''}`);
}

async function adminProject(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, ADMIN_USAGE, { title: { type: 'string' } });
  if (help) return 0;
  const [id] = positionalsExactly(positionals, ['a project ID']);
  const title = stringOption(values, 'title') ?? id!;
  const client = await connect(clientFlags(values));
  const response = await client.post<{ id: string; title: string }>('/api/admin/projects', { id, title });
  return report(values, response, `project ${response.id} created ("${response.title}")`);
}

async function adminMember(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, ADMIN_USAGE, { role: { type: 'string' } });
  if (help) return 0;
  const [projectId, username] = positionalsExactly(positionals, ['a PROJECT', 'a USER']);
  const role = (stringOption(values, 'role') ?? 'USER').toUpperCase();
  if (!ROLES.includes(role)) throw new CliError(`--role: "${values.role}" is not one of ${ROLES.join(', ')}`);
  const client = await connect(clientFlags(values));
  const response = await client.post<unknown>('/api/admin/projects/members', { projectId, username, role });
  return report(values, response, `${username} is ${role} in project ${projectId}`);
}

async function adminGrant(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, ADMIN_USAGE, {
    user: { type: 'string' },
    project: { type: 'string' },
    category: { type: 'string' },
    credits: { type: 'string' },
    start: { type: 'string' },
    end: { type: 'string' },
  });
  if (help) return 0;
  positionalsExactly(positionals, []);
  const user = stringOption(values, 'user');
  const project = stringOption(values, 'project');
  if ((user === undefined) === (project === undefined)) {
    throw new CliError(`grant: give either --user NAME or --project ID\n\n${ADMIN_USAGE}`);
  }
  const category = stringOption(values, 'category');
  if (category === undefined) throw new CliError(`grant: --category is missing\n\n${ADMIN_USAGE}`);
  const creditsText = stringOption(values, 'credits');
  if (creditsText === undefined) throw new CliError(`grant: --credits is missing\n\n${ADMIN_USAGE}`);
  // Digit groups may be written with "_" or ",": 1_000_000.
  const credits = Number(creditsText.replace(/[_,]/g, ''));
  if (!/^\d[\d_,]*(\.\d+)?$/.test(creditsText) || !Number.isFinite(credits)) {
    throw new CliError(`--credits: "${creditsText}" is not a number of credits`);
  }
  const now = Date.now();
  const startText = stringOption(values, 'start');
  const endText = stringOption(values, 'end');
  const start = startText !== undefined ? parseDate(startText, '--start', now) : undefined;
  const end = endText !== undefined ? parseDate(endText, '--end', now) : undefined;
  const owner = user !== undefined ? `user:${user}` : `project:${project}`;
  const client = await connect(clientFlags(values));
  const response = await client.post<{ credits: number; start: number; end: number }>(
    '/api/accounting/allocations',
    {
      owner,
      category,
      credits,
      ...(start !== undefined ? { start } : {}),
      ...(end !== undefined ? { end } : {}),
    },
  );
  const period = `${formatUtc(response.start, true)} to ${formatUtc(response.end, true)} UTC`;
  return report(
    values,
    response,
    `granted ${response.credits.toLocaleString('en-US')} credits in ${category} to ${owner}, valid ${period}`,
  );
}

async function adminToken(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, ADMIN_USAGE, {
    description: { type: 'string' },
  });
  if (help) return 0;
  const [username] = positionalsExactly(positionals, ['a USER']);
  const description = stringOption(values, 'description') ?? 'made by ucompute admin token';
  const client = await connect(clientFlags(values));
  const response = await client.post<{ token: string }>('/api/admin/tokens', { username, description });
  // The token alone, so that `export UCOMPUTE_TOKEN=$(ucompute admin token alice)` works.
  return report(values, response, response.token);
}
