import { Type } from '@sinclair/typebox';
import { ProjectId, Username } from '../model/owner.ts';
import { closed } from '../model/schema.ts';
import { TOKEN_ID_PATTERN } from '../store/directory.ts';
import { Role } from './schemas.ts';

// The administrators' lists, revocations and audit log: request and response schemas.

const bulk = <T extends Parameters<typeof Type.Array>[0]>(item: T) =>
  Type.Array(item, { minItems: 1, maxItems: 100 });

export const ListQuery = Type.Object(
  {
    query: Type.Optional(Type.String({ maxLength: 200, description: 'text the names contain (any case)' })),
    next: Type.Optional(Type.String({ maxLength: 200, description: 'the `next` of the page before' })),
    itemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'default 100' })),
  },
  closed,
);

const page = <T extends Parameters<typeof Type.Array>[0]>(item: T) =>
  Type.Object({ items: Type.Array(item), next: Type.Union([Type.String(), Type.Null()]) });

const Membership = Type.Object({ id: Type.String(), role: Role });
export const UsersPage = page(
  Type.Object({
    name: Type.String(),
    admin: Type.Boolean(),
    createdAt: Type.Integer(),
    disabledAt: Type.Union([Type.Integer(), Type.Null()]),
    tokens: Type.Integer({ description: 'how many API tokens the user has' }),
    projects: Type.Array(Membership),
  }),
);
export const ProjectsPage = page(
  Type.Object({
    id: Type.String(),
    title: Type.String(),
    createdAt: Type.Integer(),
    members: Type.Array(Type.Object({ username: Type.String(), role: Role })),
  }),
);
export const TokenId = Type.String({
  pattern: TOKEN_ID_PATTERN,
  description: "a token's id (never the token)",
});
export const TokenMetadata = Type.Object({
  id: Type.String(),
  username: Type.String(),
  description: Type.String(),
  createdAt: Type.Integer(),
});
export const TokensPage = page(TokenMetadata);
export const GrantsPage = page(
  Type.Object({
    id: Type.Integer(),
    owner: Type.String(),
    category: Type.String(),
    credits: Type.Number(),
    used: Type.Number(),
    startAt: Type.Integer(),
    endAt: Type.Integer(),
  }),
);

export const RevokeTokensRequest = Type.Object({ items: bulk(Type.Object({ id: TokenId }, closed)) }, closed);
export const RevokeTokensResponse = Type.Object({ responses: Type.Array(TokenMetadata) });
export const UsersRequest = Type.Object({ items: bulk(Type.Object({ name: Username }, closed)) }, closed);
export const UsersResponse = Type.Object({
  responses: Type.Array(Type.Object({ name: Type.String(), disabled: Type.Boolean() })),
});
export const RemoveMemberRequest = Type.Object({ projectId: ProjectId, username: Username }, closed);
export const RemoveMemberResponse = Type.Object({ projectId: Type.String(), username: Type.String() });

export const AuditQuery = Type.Object(
  {
    actor: Type.Optional(Username),
    action: Type.Optional(
      Type.String({ maxLength: 100, description: 'an action or its start: `token`, `user.disable`' }),
    ),
    target: Type.Optional(
      Type.String({ maxLength: 200, description: '`user:<name>`, `project:<id>`, `token:<id>`' }),
    ),
    next: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,15}$', description: 'the `next` of the page before' }),
    ),
    itemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'default 100' })),
  },
  closed,
);
export const AuditPage = page(
  Type.Object({
    id: Type.Integer(),
    at: Type.Integer({ description: 'epoch ms' }),
    actor: Type.String(),
    action: Type.String(),
    target: Type.String(),
    details: Type.Record(Type.String(), Type.Unknown()),
  }),
);
