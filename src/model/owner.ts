import { type Static, Type } from '@sinclair/typebox';
import { closed } from './schema.ts';

export const USERNAME_PATTERN = '^[a-z_][a-z0-9_.-]{0,63}$';
export const PROJECT_ID_PATTERN = '^[a-z0-9][a-z0-9_.-]{0,63}$';

export const Username = Type.String({
  pattern: USERNAME_PATTERN,
  description: 'a user name (lower-case letters, digits, _ . -)',
});
export const ProjectId = Type.String({
  pattern: PROJECT_ID_PATTERN,
  description: 'a project id (lower-case letters, digits, _ . -)',
});

/** Who a job, an allocation or a file belongs to: a user's own workspace, or a project. */
export const Owner = Type.Object(
  {
    createdBy: Username,
    project: Type.Optional(ProjectId),
  },
  closed,
);
export type Owner = Static<typeof Owner>;

/** The drives an owner's files live in (UCloud/Storage layout). */
export function ownerDrive(owner: Owner): string {
  return owner.project !== undefined ? `/projects/${owner.project}` : `/home/${owner.createdBy}`;
}

/** A stable key for an owner, used for fair share, wallets and namespaces. */
export function ownerKey(owner: Owner): { kind: 'user' | 'project'; id: string } {
  return owner.project !== undefined
    ? { kind: 'project', id: owner.project }
    : { kind: 'user', id: owner.createdBy };
}

/** The owner as accounts and fair-share weights name it: `user:<name>` or `project:<id>`. */
export function accountOf(owner: Owner): string {
  const { kind, id } = ownerKey(owner);
  return `${kind}:${id}`;
}
