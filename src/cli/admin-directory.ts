import type { AllocationRecord } from '../store/accounting.ts';
import type { AuditEntry } from '../store/audit-log.ts';
import { clientFlags, type OptionValues, parseClientCommand, stringOption } from './args.ts';
import { type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { formatTime, printJson, table } from './format.ts';
import { cliIo } from './io.ts';

/** `ucompute admin users|projects|tokens|grants|audit`, and the changes that take access away. */

export const ADMIN_DIRECTORY_USAGE = `  admin users [SEARCH]                           users: admin, disabled, tokens, projects
  admin projects [SEARCH]                        projects and their members
  admin tokens [SEARCH]                          API tokens' metadata (id, user, description;
                                                 never the token)
  admin grants [SEARCH]                          grants of credits, newest first
  admin revoke TOKEN-ID...                       revoke tokens: they open nothing from now on
  admin disable USER... | admin enable USER...   a disabled user's tokens, sign-ins and sessions
                                                 stop working (their jobs go on)
  admin remove-member PROJECT USER               take USER out of PROJECT
  admin audit [--actor U] [--action A] [--target T] [--limit N]
                                                 every administrative action, newest first
                                                 (--action: an action or its start, e.g. token)`;

interface Page<T> {
  items: T[];
  next: string | null;
}

/** Reads every page of a list (or `limit` items of it). */
async function all<T>(
  client: Client,
  path: string,
  query: Record<string, string | undefined>,
  limit = Number.POSITIVE_INFINITY,
): Promise<T[]> {
  const items: T[] = [];
  let next: string | null = null;
  for (let page = 0; page < 10_000 && items.length < limit; page++) {
    const answer: Page<T> = await client.get<Page<T>>(path, {
      ...query,
      ...(next !== null ? { next } : {}),
      itemsPerPage: 1000,
    });
    items.push(...answer.items);
    next = answer.next;
    if (next === null) break;
  }
  return items.slice(0, limit);
}

const when = (ms: number | null) => (ms === null ? '-' : formatTime(ms));

type Lister = (client: Client, search: string | undefined) => Promise<{ json: unknown; text: string }>;

const LISTS: Record<string, Lister> = {
  async users(client, query) {
    const users = await all<{
      name: string;
      admin: boolean;
      disabledAt: number | null;
      tokens: number;
      createdAt: number;
      projects: { id: string; role: string }[];
    }>(client, '/api/admin/users', { query });
    return {
      json: { items: users },
      text: table(
        ['NAME', 'ADMIN', 'DISABLED', 'TOKENS', 'CREATED', 'PROJECTS'],
        users.map((u) => [
          u.name,
          u.admin ? 'yes' : '',
          when(u.disabledAt),
          String(u.tokens),
          formatTime(u.createdAt),
          u.projects.map((p) => `${p.id} (${p.role})`).join(', '),
        ]),
      ),
    };
  },
  async projects(client, query) {
    const projects = await all<{
      id: string;
      title: string;
      createdAt: number;
      members: { username: string; role: string }[];
    }>(client, '/api/admin/projects', { query });
    return {
      json: { items: projects },
      text: table(
        ['ID', 'TITLE', 'CREATED', 'MEMBERS'],
        projects.map((p) => [
          p.id,
          p.title,
          formatTime(p.createdAt),
          p.members.map((m) => `${m.username} (${m.role})`).join(', '),
        ]),
      ),
    };
  },
  async tokens(client, query) {
    const tokens = await all<{ id: string; username: string; description: string; createdAt: number }>(
      client,
      '/api/admin/tokens',
      { query },
    );
    return {
      json: { items: tokens },
      text: table(
        ['ID', 'USER', 'CREATED', 'DESCRIPTION'],
        tokens.map((t) => [t.id, t.username, formatTime(t.createdAt), t.description]),
      ),
    };
  },
  async grants(client, query) {
    const grants = await all<AllocationRecord>(client, '/api/admin/grants', { query });
    const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 2 });
    return {
      json: { items: grants },
      text: table(
        ['ID', 'OWNER', 'CATEGORY', 'CREDITS', 'USED', 'FROM', 'TO'],
        grants.map((g) => [
          String(g.id),
          g.owner,
          g.category,
          n(g.credits),
          n(g.used),
          formatTime(g.startAt),
          formatTime(g.endAt),
        ]),
      ),
    };
  },
};

const print = (values: OptionValues, json: unknown, text: string) =>
  values.json === true ? printJson(json) : cliIo().stdout.write(text);

/** This file's subcommands, for completion. */
export const ADMIN_DIRECTORY_COMMANDS = [
  'users',
  'projects',
  'tokens',
  'grants',
  'revoke',
  'disable',
  'enable',
  'remove-member',
  'audit',
];

/** Runs one of this file's subcommands; undefined when `name` is not one of them. */
export function adminDirectoryCommand(
  name: string,
  usage: string,
): ((argv: string[]) => Promise<number>) | undefined {
  const lister = LISTS[name];
  if (lister) {
    return async (argv) => {
      const { values, positionals, help } = parseClientCommand(argv, usage, {});
      if (help) return 0;
      if (positionals.length > 1) throw new CliError(`admin ${name} takes one SEARCH at most\n\n${usage}`);
      const { json, text } = await lister(await connect(clientFlags(values)), positionals[0]);
      print(values, json, text);
      return 0;
    };
  }
  const bulk: Record<string, { path: string; item: (arg: string) => object; says: (arg: string) => string }> =
    {
      revoke: {
        path: '/api/admin/tokens/revoke',
        item: (id) => ({ id }),
        says: (id) => `token ${id} revoked`,
      },
      disable: {
        path: '/api/admin/users/disable',
        item: (name) => ({ name }),
        says: (user) => `user ${user} disabled`,
      },
      enable: {
        path: '/api/admin/users/enable',
        item: (name) => ({ name }),
        says: (user) => `user ${user} enabled`,
      },
    };
  const change = bulk[name];
  if (change) {
    return async (argv) => {
      const { values, positionals, help } = parseClientCommand(argv, usage, {});
      if (help) return 0;
      if (positionals.length === 0)
        throw new CliError(
          `admin ${name} needs at least one ${name === 'revoke' ? 'TOKEN-ID' : 'USER'}\n\n${usage}`,
        );
      const answer = await (await connect(clientFlags(values))).post<unknown>(change.path, {
        items: positionals.map(change.item),
      });
      print(values, answer, positionals.map((p) => `${change.says(p)}\n`).join(''));
      return 0;
    };
  }
  if (name === 'remove-member') {
    return async (argv) => {
      const { values, positionals, help } = parseClientCommand(argv, usage, {});
      if (help) return 0;
      if (positionals.length !== 2) throw new CliError(`expected a PROJECT and a USER\n\n${usage}`);
      const [projectId, username] = positionals;
      const answer = await (await connect(clientFlags(values))).post<unknown>(
        '/api/admin/projects/members/remove',
        { projectId, username },
      );
      print(values, answer, `${username} is no longer a member of project ${projectId}\n`);
      return 0;
    };
  }
  if (name === 'audit') return (argv) => auditCommand(argv, usage);
  return undefined;
}

async function auditCommand(argv: string[], usage: string): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, usage, {
    actor: { type: 'string' },
    action: { type: 'string' },
    target: { type: 'string' },
    limit: { type: 'string' },
  });
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${usage}`);
  const limitText = stringOption(values, 'limit') ?? '50';
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || limit < 1)
    throw new CliError(`--limit: "${limitText}" must be a whole number of at least 1`);
  const entries = await all<AuditEntry>(
    await connect(clientFlags(values)),
    '/api/admin/audit',
    {
      actor: stringOption(values, 'actor'),
      action: stringOption(values, 'action'),
      target: stringOption(values, 'target'),
    },
    limit,
  );
  const details = (d: Record<string, unknown>) =>
    Object.entries(d)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
  print(
    values,
    { items: entries },
    table(
      ['WHEN', 'WHO', 'ACTION', 'TARGET', 'DETAILS'],
      entries.map((e) => [formatTime(e.at), e.actor, e.action, e.target, details(e.details)]),
    ),
  );
  return 0;
}
