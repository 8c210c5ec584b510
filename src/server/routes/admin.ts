import { adminOperations } from '../../jobs/admin.ts';
import type { Role } from '../../store/users.ts';
import { type ApiRoutes, adminOnly, errors } from '../api.ts';
import {
  CreateProjectRequest,
  CreateTokenRequest,
  CreateUserRequest,
  GrantRequest,
  GrantResponse,
  MemberRequest,
  MemberResponse,
  ProjectResponse,
  TokenResponse,
  UserResponse,
} from '../schemas.ts';

/** What administrators do: credits, users, projects, members and tokens. */
export const adminRoutes: ApiRoutes = async (api) => {
  const admin = adminOperations(api.store, api.jobEnvironment);
  api.post(
    '/api/accounting/allocations',
    {
      config: adminOnly,
      schema: {
        summary: 'Grant credits to an owner (administrators)',
        tags: ['accounting', 'admin'],
        body: GrantRequest,
        response: { 200: GrantResponse, ...errors },
      },
    },
    async (request) => admin.grant(request.caller, request.body),
  );

  api.post(
    '/api/admin/users',
    {
      config: adminOnly,
      schema: {
        summary: 'Create a user (administrators)',
        tags: ['admin'],
        body: CreateUserRequest,
        response: { 200: UserResponse, ...errors },
      },
    },
    async (request) => admin.createUser(request.caller, request.body.name, request.body.admin),
  );

  api.post(
    '/api/admin/projects',
    {
      config: adminOnly,
      schema: {
        summary: 'Create a project (administrators)',
        tags: ['admin'],
        body: CreateProjectRequest,
        response: { 200: ProjectResponse, ...errors },
      },
    },
    async (request) => admin.createProject(request.caller, request.body.id, request.body.title),
  );

  api.post(
    '/api/admin/projects/members',
    {
      config: adminOnly,
      schema: {
        summary: "Add a project member, or change a member's role (administrators)",
        tags: ['admin'],
        body: MemberRequest,
        response: { 200: MemberResponse, ...errors },
      },
    },
    async (request) => {
      const { projectId, username, role } = request.body;
      return admin.setMember(request.caller, projectId, username, role as Role);
    },
  );

  api.post(
    '/api/admin/tokens',
    {
      config: adminOnly,
      schema: {
        summary: 'Make an API token for a user (administrators)',
        tags: ['admin'],
        body: CreateTokenRequest,
        response: { 200: TokenResponse, ...errors },
      },
    },
    async (request) => admin.createToken(request.caller, request.body.username, request.body.description),
  );
};
