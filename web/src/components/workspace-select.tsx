import type { User } from '../types.ts';
import { chooseWorkspace, workspace } from '../workspace.ts';

/** The header's workspace selector: the user's own, or one of their projects (remembered). */
export function WorkspaceSelect({ user }: { user: User }) {
  const projects = user.projects ?? [];
  if (projects.length === 0) return null;
  return (
    <label class="workspace">
      <span class="visually-hidden">Workspace</span>
      <select
        class="workspace-select"
        value={workspace.value}
        onChange={(e) => chooseWorkspace(e.currentTarget.value)}
      >
        <option value="">My workspace ({user.username})</option>
        {projects.map((p) => (
          <option key={p.id} value={p.id}>
            Project {p.title ?? p.id}
            {p.role !== undefined ? ` (${p.role})` : ''}
          </option>
        ))}
      </select>
    </label>
  );
}
