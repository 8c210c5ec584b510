import { type Static, Type } from '@sinclair/typebox';
import { Application, ApplicationType, SimpleDuration, Tool } from '../model/application.ts';
import { JOB_ID_PATTERN } from '../model/ids.ts';
import { Job, JobSpecification, JobState, JobStatus, JobUpdate } from '../model/job.ts';
import { PROJECT_ID_PATTERN, ProjectId, USERNAME_PATTERN, Username } from '../model/owner.ts';
import { Product } from '../model/product.ts';
import { closed, StringEnum } from '../model/schema.ts';

/**
 * The HTTP API's own request and response shapes, built from the model's schemas: one definition
 * gives validation, the handlers' types, response serialisation and /openapi.json.
 */

/** The most items one bulk request may carry (the service's own limit). */
export const MAX_ITEMS = 1000;

const JobId = Type.String({
  pattern: JOB_ID_PATTERN,
  description: 'a job id (1 to 40 lower-case letters and digits)',
});
const bulk = <T extends Parameters<typeof Type.Array>[0]>(item: T) =>
  Type.Array(item, { minItems: 1, maxItems: MAX_ITEMS });

export const ErrorBody = Type.Object(
  {
    why: Type.String({ description: 'what went wrong (UCloud clients read this)' }),
    errorCode: Type.String({ description: 'the kind of failure, e.g. BAD_REQUEST, NOT_FOUND' }),
    message: Type.String({ description: 'the same text as `why`, for older clients' }),
    issues: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
  },
  { description: 'what went wrong, as UCloud answers it; `issues` name the offending fields' },
);
export type ErrorBody = Static<typeof ErrorBody>;

// ---- jobs ---------------------------------------------------------------------------------------

export const CreateHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'a repeat with the same key and body returns the same ids and creates nothing',
    }),
  ),
  // The description doubles as the error message ("must be a project id ..."), so it names the thing.
  project: Type.Optional(ProjectId),
});

/** UCloud's BulkRequest: `type: "bulk"` is what its clients send; the items are what counts. */
const bulkType = { type: Type.Optional(Type.Literal('bulk')) };

export const CreateRequest = Type.Object({ ...bulkType, items: bulk(JobSpecification) }, closed);
export const CreateResponse = Type.Object({ responses: Type.Array(Type.Object({ id: Type.String() })) });

export const BrowseQuery = Type.Object(
  {
    itemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 250 })),
    next: Type.Optional(
      Type.String({ pattern: JOB_ID_PATTERN, description: 'the `next` token of the previous page' }),
    ),
    filterState: Type.Optional(JobState),
    filterApplication: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  closed,
);
export const BrowseResponse = Type.Object({
  items: Type.Array(Job),
  next: Type.Union([Type.String(), Type.Null()]),
});

export const JobIdQuery = Type.Object({ id: JobId }, closed);

export const TerminateRequest = Type.Object(
  { ...bulkType, items: bulk(Type.Object({ id: JobId }, closed)) },
  closed,
);
export const ExtendRequest = Type.Object(
  { ...bulkType, items: bulk(Type.Object({ jobId: JobId, requestedTime: SimpleDuration }, closed)) },
  closed,
);
export const BulkEmptyResponse = Type.Object({ responses: Type.Array(Type.Object({})) });

/** One WebSocket message of /api/jobs/follow (documented as its 101 response). */
export const FollowMessage = Type.Object(
  {
    updates: Type.Array(JobUpdate),
    log: Type.Array(
      Type.Object({
        rank: Type.Integer(),
        stdout: Type.Optional(Type.String()),
        stderr: Type.Optional(Type.String()),
      }),
    ),
    newStatus: Type.Optional(JobStatus),
  },
  { description: 'Switching Protocols; every WebSocket message then has this shape' },
);
export type FollowMessage = Static<typeof FollowMessage>;

// ---- catalogue and products --------------------------------------------------------------------

export const AppSummary = Type.Object({
  name: Type.String(),
  version: Type.String(),
  title: Type.String(),
  description: Type.String(),
  applicationType: ApplicationType,
  parameters: Type.Array(
    Type.Object({ name: Type.String(), type: Type.String(), title: Type.String(), optional: Type.Boolean() }),
  ),
});
export type AppSummary = Static<typeof AppSummary>;
export const AppsResponse = Type.Object({ items: Type.Array(AppSummary) });

export const AppRetrieveQuery = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    version: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'default: the newest' })),
  },
  closed,
);
export const AppRetrieveResponse = Type.Object({ application: Application, tool: Tool });

export const ProductsResponse = Type.Object({ items: Type.Array(Product) });

// ---- accounting ---------------------------------------------------------------------------------

const Account = Type.String({
  pattern: `^(user:${USERNAME_PATTERN.slice(1, -1)}|project:${PROJECT_ID_PATTERN.slice(1, -1)})$`,
  description: 'user:<name> or project:<id>',
});

export const Wallet = Type.Object({
  owner: Type.String(),
  category: Type.String(),
  allocated: Type.Number(),
  used: Type.Number(),
  balance: Type.Number(),
});
export const WalletsResponse = Type.Object({ items: Type.Array(Wallet) });

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms; default: 30 days before `to`' })),
    to: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms, exclusive; default: now' })),
    bucket: Type.Optional(StringEnum(['day', 'hour'], 'bucket size, UTC (default: day)')),
  },
  closed,
);
export const UsageResponse = Type.Object({
  from: Type.Integer(),
  to: Type.Integer(),
  bucket: StringEnum(['day', 'hour']),
  items: Type.Array(
    Type.Object({
      owner: Type.String(),
      category: Type.String(),
      start: Type.Integer({ description: 'start of the bucket, epoch ms' }),
      credits: Type.Number(),
    }),
  ),
});

const MAX_CREDITS = 1e15;
export const GrantRequest = Type.Object(
  {
    owner: Account,
    category: Type.String({ minLength: 1, maxLength: 64 }),
    credits: Type.Number({ minimum: 0, maximum: MAX_CREDITS }),
    start: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms; default: now' })),
    end: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms; default: a year after start' })),
  },
  closed,
);
export const GrantResponse = Type.Object({
  id: Type.Integer(),
  owner: Type.String(),
  category: Type.String(),
  credits: Type.Number(),
  start: Type.Integer(),
  end: Type.Integer(),
});

// ---- administration -----------------------------------------------------------------------------

export const Role = StringEnum(['PI', 'ADMIN', 'USER']);

export const CreateUserRequest = Type.Object(
  { name: Username, admin: Type.Optional(Type.Boolean()) },
  closed,
);
export const UserResponse = Type.Object({ name: Type.String(), admin: Type.Boolean() });

export const CreateProjectRequest = Type.Object(
  { id: ProjectId, title: Type.String({ minLength: 1, maxLength: 200 }) },
  closed,
);
export const ProjectResponse = Type.Object({ id: Type.String(), title: Type.String() });

export const MemberRequest = Type.Object({ projectId: ProjectId, username: Username, role: Role }, closed);
export const MemberResponse = Type.Object({ projectId: Type.String(), username: Type.String(), role: Role });

export const CreateTokenRequest = Type.Object(
  { username: Username, description: Type.String({ maxLength: 200 }) },
  closed,
);
export const TokenResponse = Type.Object({ token: Type.String() });

// ---- service ------------------------------------------------------------------------------------

export const HealthResponse = Type.Object({ ok: Type.Boolean() });
