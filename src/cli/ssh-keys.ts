import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { clientFlags, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { formatTime, printJson, table } from './format.ts';
import { cliIo } from './io.ts';

/** `ucompute ssh-keys ...`: the caller's SSH public keys, which jobs with ssh accept. */

export const SSH_KEYS_USAGE = `Usage: ucompute ssh-keys COMMAND [options]

Your SSH public keys: jobs of applications that offer ssh (such as ssh-server) let you log in
with them. The web interface has the same list under your name, "SSH keys".

Commands:
  add FILE [--title TITLE]  add the public key in FILE (e.g. ~/.ssh/id_ed25519.pub; - reads it from
                            standard input); the title defaults to the key's comment, else FILE's name
  ls                        list your keys: id, title, fingerprint, when added
  rm ID...                  remove keys (an id, or a prefix that names one key)

${CLIENT_OPTIONS_USAGE}`;

interface SshKey {
  id: string;
  createdAt: number;
  fingerprint: string;
  specification: { title: string; key: string };
}

/** Keys read per page; a user has few. */
const PAGE = 1000;

export async function sshKeysCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, SSH_KEYS_USAGE, {
    title: { type: 'string' },
  });
  if (help) return 0;
  const [command, ...args] = positionals;
  const json = values.json === true;
  if (command === 'add' && args.length === 1) {
    const { key, title } = await readKey(args[0]!, stringOption(values, 'title'));
    const client = await connect(clientFlags(values));
    const created = await client.post<{ responses: { id: string }[] }>('/api/ssh', {
      items: [{ title, key }],
    });
    const id = created.responses[0]?.id ?? '';
    const added = (await allKeys(client)).find((k) => k.id === id);
    if (json) printJson(added ?? created);
    else cliIo().stdout.write(`${id}  ${title}  ${added?.fingerprint ?? ''}\n`);
    return 0;
  }
  if (command === 'ls' && args.length === 0) {
    const keys = await allKeys(await connect(clientFlags(values)));
    if (json) printJson({ items: keys });
    else if (keys.length === 0)
      cliIo().stdout.write('no SSH keys yet: add one with `ucompute ssh-keys add FILE.pub`\n');
    else
      cliIo().stdout.write(
        table(
          ['ID', 'TITLE', 'FINGERPRINT', 'ADDED'],
          keys.map((k) => [k.id, k.specification.title, k.fingerprint, formatTime(k.createdAt)]),
        ),
      );
    return 0;
  }
  if (command === 'rm' && args.length > 0) {
    const client = await connect(clientFlags(values));
    const keys = await allKeys(client);
    const ids = args.map((text) => keyId(keys, text));
    await client.delete('/api/ssh', { items: ids.map((id) => ({ id })) });
    if (json) printJson({ removed: ids });
    else for (const id of ids) cliIo().stdout.write(`${id}: removed\n`);
    return 0;
  }
  throw new CliError(
    `${command === undefined ? 'which ssh-keys command?' : `ssh-keys ${positionals.join(' ')}: not a command`}\n\n${SSH_KEYS_USAGE}`,
  );
}

/** The key in a file (or standard input): its one line, and its title. */
async function readKey(file: string, title: string | undefined): Promise<{ key: string; title: string }> {
  const text =
    file === '-'
      ? (await buffer(cliIo().stdin)).toString('utf8')
      : await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
          throw new CliError(`${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
        });
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== 1)
    throw new CliError(`${file}: must hold one public key on one line (it holds ${lines.length})`);
  const key = lines[0]!.trim();
  if (key.includes('PRIVATE KEY')) throw new CliError(`${file}: is a private key; give the .pub file`);
  const comment = key.split(/\s+/).slice(2).join(' ');
  return { key, title: title ?? (comment || (file === '-' ? 'key' : basename(file))) };
}

async function allKeys(client: Client): Promise<SshKey[]> {
  return (await client.get<{ items: SshKey[] }>('/api/ssh/browse', { itemsPerPage: PAGE })).items;
}

/** The id of the one key whose id is `text` or starts with it. */
function keyId(keys: SshKey[], text: string): string {
  const matches = keys.filter((k) => k.id.startsWith(text));
  if (matches.some((k) => k.id === text) || matches.length === 1)
    return matches.find((k) => k.id === text)?.id ?? matches[0]!.id;
  if (matches.length === 0) throw new CliError(`SSH key ${text} was not found`, 1);
  throw new CliError(
    `SSH key id prefix ${text} is ambiguous: it matches ${matches.map((k) => k.id).join(', ')}`,
  );
}
