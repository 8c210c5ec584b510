import { getJson, session } from './api.ts';
import type { Wallet } from './types.ts';
import { workspaceDrive } from './workspace.ts';

/** The drives the signed-in user reaches, the chosen workspace's first: their home, and their projects' drives. */
export async function userDrives(): Promise<string[]> {
  const user = session.value?.user;
  if (!user) return [];
  const projects = new Set((user.projects ?? []).map((p) => p.id));
  // Projects the user leads have wallets even when the session does not list memberships.
  const wallets = await getJson<{ items: Wallet[] }>('/api/accounting/wallets').catch(() => ({ items: [] }));
  for (const w of wallets.items)
    if (w.owner.startsWith('project:')) projects.add(w.owner.slice('project:'.length));
  const first = workspaceDrive(user);
  const all = [`/home/${user.username}`, ...[...projects].sort().map((id) => `/projects/${id}`)];
  return [first, ...all.filter((d) => d !== first)];
}

/** The folder a path lies in (`/home/a/b.txt` → `/home/a`). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

export function joinPath(folder: string, name: string): string {
  return `${folder.replace(/\/+$/, '')}/${name}`;
}
