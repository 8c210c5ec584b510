import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { clientFlags, parseClientCommand } from './args.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { CliError } from './errors.ts';

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
    process.stdout.write(`${JSON.stringify(link)}\n`);
    return 0;
  }
  if (values['url-only']) {
    process.stdout.write(`${link.url}\n`);
    return 0;
  }
  process.stdout.write(`${link.url}\n(works once, within two minutes)\n`);
  const opener = await browserOpener();
  if (opener !== undefined) {
    await openInBrowser(opener, link.url);
    process.stdout.write('opened in your browser\n');
  }
  return 0;
}

/** The command that opens a page in the user's browser, when this session has one. */
async function browserOpener(): Promise<string | undefined> {
  const chosen = process.env.BROWSER?.split(delimiter)[0];
  if (chosen) return chosen;
  if (process.platform === 'darwin') return 'open';
  if (process.platform !== 'linux' || !(process.env.DISPLAY || process.env.WAYLAND_DISPLAY)) return undefined;
  return (await onPath('xdg-open')) ? 'xdg-open' : undefined;
}

async function onPath(command: string): Promise<boolean> {
  for (const folder of (process.env.PATH ?? '').split(delimiter)) {
    if (folder === '') continue;
    const found = await access(join(folder, command), constants.X_OK).then(
      () => true,
      () => false,
    );
    if (found) return true;
  }
  return false;
}

/**
 * Opens `url` through a page in a folder of our own (mode 0700) that redirects to it, as Jupyter
 * does: the browser's command line names the file, never the secret.
 */
async function openInBrowser(opener: string, url: string): Promise<void> {
  const folder = await mkdtemp(join(tmpdir(), 'ucompute-web-'));
  const page = join(folder, 'sign-in.html');
  const href = url.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
  await writeFile(
    page,
    `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${href}">` +
      `<title>ucompute</title><p><a href="${href}">Sign in to ucompute</a></p>\n`,
    { mode: 0o600 },
  );
  await new Promise<void>((resolve) => {
    const child = spawn(opener, [pathToFileURL(page).href], { detached: true, stdio: 'ignore' });
    // A browser that cannot start leaves the printed link, which works as well.
    child.once('error', () => resolve());
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
  });
}
