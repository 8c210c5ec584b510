import { clientFlags, parseClientCommand } from './args.ts';
import { openInBrowser } from './browser.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const WEB_USAGE = `Usage: ucompute web [--url-only] [options]

Signs a browser in to the web interface as you (as your token does): prints a link that works
once, within two minutes, and opens it in your browser when there is one. The browser is handed
a file only you can read that leads to the link, never the link itself: a command line is
readable by every user of the machine.

Options:
  --url-only          print the link only; open no browser

${CLIENT_OPTIONS_USAGE}`;

interface SignInLink {
  url: string;
  expiresAt: number;
}

export async function webCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, WEB_USAGE, {
    'url-only': { type: 'boolean' },
  });
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${WEB_USAGE}`);
  const client = await connect(clientFlags(values));
  const link = await client.post<SignInLink>('/api/auth/links', {});
  if (values.json) {
    cliIo().stdout.write(`${JSON.stringify(link)}\n`);
    return 0;
  }
  if (values['url-only']) {
    cliIo().stdout.write(`${link.url}\n`);
    return 0;
  }
  cliIo().stdout.write(`${link.url}\n(works once, within two minutes)\n`);
  if (await openInBrowser(link.url, 'Sign in to ucompute')) cliIo().stdout.write('opened in your browser\n');
  return 0;
}
