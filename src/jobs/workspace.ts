import { ValidationError } from '../model/errors.ts';
import { PROJECT_ID_PATTERN } from '../model/owner.ts';
import type { UserStore } from '../store/users.ts';
import type { Caller } from './access.ts';
import { forbidden, notFound } from './errors.ts';

const PROJECT_ID = new RegExp(PROJECT_ID_PATTERN);

/**
 * The caller working in a project's workspace (UCloud's `Project` header): allowed to members of
 * the project, whatever their role, and to administrators for any project that exists. Without a
 * project the caller is unchanged.
 */
export async function inWorkspace(
  users: UserStore,
  caller: Caller,
  project: string | undefined,
): Promise<Caller> {
  if (project === undefined) return caller;
  if (!PROJECT_ID.test(project)) {
    throw new ValidationError([
      { path: 'project', message: `"${project}" is not a project id (the Project header)` },
    ]);
  }
  const member = (await users.memberships(caller.username)).some((m) => m.projectId === project);
  if (!member && !caller.admin) throw forbidden(`you are not a member of project ${project}`);
  if (!member && !(await users.projectExists(project))) throw notFound(`project ${project}`);
  return { ...caller, project };
}
