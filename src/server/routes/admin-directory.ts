import { adminOperations } from '../../jobs/admin.ts';
import {
  AuditPage,
  AuditQuery,
  GrantsPage,
  ListQuery,
  ProjectsPage,
  RemoveMemberRequest,
  RemoveMemberResponse,
  RevokeTokensRequest,
  RevokeTokensResponse,
  TokensPage,
  UsersPage,
  UsersRequest,
  UsersResponse,
} from '../admin-schemas.ts';
import { type ApiRoutes, adminOnly, errors } from '../api.ts';

/**
 * What administrators see and take away: users, projects with their members, tokens (metadata
 * only) and grants, searched; tokens revoked, users disabled and enabled, members removed; and the
 * audit log of every administrative action.
 */
export const adminDirectoryRoutes: ApiRoutes = async (api) => {
  const admin = adminOperations(api.store, api.jobEnvironment);
  const tags = ['admin'];
  const list = (summary: string, response: object) => ({
    config: adminOnly,
    schema: { summary, tags, querystring: ListQuery, response: { 200: response, ...errors } },
  });

  api.get('/api/admin/users', list('Users, by name (administrators)', UsersPage), async (request) =>
    admin.users(request.query),
  );
  api.get(
    '/api/admin/projects',
    list('Projects and their members, by id (administrators)', ProjectsPage),
    async (request) => admin.projects(request.query),
  );
  api.get(
    '/api/admin/tokens',
    list("API tokens' metadata: id, user, description (administrators)", TokensPage),
    async (request) => admin.tokens(request.query),
  );
  api.get(
    '/api/admin/grants',
    list('Grants of credits, newest first (administrators)', GrantsPage),
    async (request) => admin.grants(request.query),
  );

  api.post(
    '/api/admin/tokens/revoke',
    {
      config: adminOnly,
      schema: {
        summary: 'Revoke API tokens by id: each opens nothing from now on (administrators)',
        tags,
        body: RevokeTokensRequest,
        response: { 200: RevokeTokensResponse, ...errors },
      },
    },
    async (request) => {
      const responses = [];
      for (const i of request.body.items) responses.push(await admin.revokeToken(request.caller, i.id));
      return { responses };
    },
  );

  for (const [verb, disabled] of [
    ['disable', true],
    ['enable', false],
  ] as const) {
    api.post(
      `/api/admin/users/${verb}`,
      {
        config: adminOnly,
        schema: {
          summary: disabled
            ? 'Disable users: their tokens, sign-ins and sessions stop working; their jobs go on (administrators)'
            : 'Enable users again: their tokens work again (administrators)',
          tags,
          body: UsersRequest,
          response: { 200: UsersResponse, ...errors },
        },
      },
      async (request) => {
        const responses = [];
        for (const i of request.body.items) {
          responses.push(await admin.setDisabled(request.caller, i.name, disabled));
          if (disabled) await api.sessions.forgetUser(i.name);
        }
        return { responses };
      },
    );
  }

  api.post(
    '/api/admin/projects/members/remove',
    {
      config: adminOnly,
      schema: {
        summary: 'Remove a member from a project (administrators)',
        tags,
        body: RemoveMemberRequest,
        response: { 200: RemoveMemberResponse, ...errors },
      },
    },
    async (request) => admin.removeMember(request.caller, request.body.projectId, request.body.username),
  );

  api.get(
    '/api/admin/audit',
    {
      config: adminOnly,
      schema: {
        summary: 'The audit log of administrative actions, newest first (administrators)',
        tags,
        querystring: AuditQuery,
        response: { 200: AuditPage, ...errors },
      },
    },
    async (request) => admin.audit(request.query),
  );
};
