import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cliIo } from './io.ts';

const escapeHtml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The command that opens a page in the user's browser, when this session has one. */
async function browserOpener(): Promise<string | undefined> {
  const { env } = cliIo();
  const chosen = env.BROWSER?.split(delimiter)[0];
  if (chosen) return chosen;
  if (process.platform === 'darwin') return 'open';
  if (process.platform !== 'linux' || !(env.DISPLAY || env.WAYLAND_DISPLAY)) return undefined;
  return (await onPath('xdg-open')) ? 'xdg-open' : undefined;
}

async function onPath(command: string): Promise<boolean> {
  for (const folder of (cliIo().env.PATH ?? '').split(delimiter)) {
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
 * Opens `url` (which holds a one-time secret) in the user's browser, when this session has one,
 * through a page in a folder of our own (mode 0700) that redirects to it, as Jupyter does: the
 * browser's command line names the file, never the secret. Answers whether a browser was asked.
 */
export async function openInBrowser(url: string, title: string): Promise<boolean> {
  const opener = await browserOpener();
  if (opener === undefined) return false;
  const folder = await mkdtemp(join(tmpdir(), 'ucompute-web-'));
  const page = join(folder, 'sign-in.html');
  const href = escapeHtml(url);
  await writeFile(
    page,
    `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${href}">` +
      `<title>ucompute</title><p><a href="${href}">${escapeHtml(title)}</a></p>\n`,
    { mode: 0o600 },
  );
  return new Promise<boolean>((resolve) => {
    const child = spawn(opener, [pathToFileURL(page).href], {
      detached: true,
      stdio: 'ignore',
      env: cliIo().env,
    });
    // A browser that cannot start leaves the printed link, which works as well.
    child.once('error', () => resolve(false));
    child.once('spawn', () => {
      child.unref();
      resolve(true);
    });
  });
}
