import { signal } from '@preact/signals';
import type { User } from './types.ts';

// The workspace the interface works in: the user's own, or one of their projects (UCloud's
// project selector). Every call carries it as the `Project` header, so launching, the jobs list,
// files and usage follow it; the choice is remembered in this browser.

const KEY = 'ucompute.workspace';

/** The project whose workspace is chosen; '' for the user's own. */
export const workspace = signal<string>(localStorage.getItem(KEY) ?? '');

export function chooseWorkspace(project: string): void {
  if (project === '') localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, project);
  workspace.value = project;
}

/** Back to the user's own workspace when the remembered project is no longer one of theirs. */
export function keepValidWorkspace(user: User): void {
  const project = workspace.value;
  if (project !== '' && !(user.projects ?? []).some((p) => p.id === project)) chooseWorkspace('');
}

/** The drive of the chosen workspace: `/projects/<id>`, or the user's home. */
export function workspaceDrive(user: User): string {
  return workspace.value === '' ? `/home/${user.username}` : `/projects/${workspace.value}`;
}

/** The wallet owner of the chosen workspace: `project:<id>`, or `user:<name>`. */
export function workspaceAccount(user: User): string {
  return workspace.value === '' ? `user:${user.username}` : `project:${workspace.value}`;
}
