import { type Static, Type } from '@sinclair/typebox';
import { Application, ApplicationType, SimpleDuration, Tool } from '../model/application.ts';
import { JOB_ID_PATTERN } from '../model/ids.ts';
import { ComputeSupport, Job, JobSpecification, JobState, JobStatus, JobUpdate } from '../model/job.ts';
import { OUTCOME_KINDS } from '../model/outcome-kinds.ts';
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

/** UCloud's JobIncludeFlags: what a job is shown with, and which jobs a page holds. */
const includeFlags = {
  includeApplication: Type.Optional(Type.Boolean({ description: 'embed status.resolvedApplication' })),
  includeProduct: Type.Optional(Type.Boolean({ description: 'embed status.resolvedProduct' })),
  includeSupport: Type.Optional(Type.Boolean({ description: 'embed status.resolvedSupport' })),
  includeParameters: Type.Optional(
    Type.Boolean({ description: 'accepted; status.jobParametersJson is always there' }),
  ),
  includeUpdates: Type.Optional(Type.Boolean({ description: 'accepted; updates are always there' })),
  includeOthers: Type.Optional(Type.Boolean({ description: 'accepted; there are no access lists' })),
};
const filterFlags = {
  filterState: Type.Optional(JobState),
  filterOutcome: Type.Optional(
    StringEnum(OUTCOME_KINDS, 'final jobs that ended this way (an addition to UCloud)'),
  ),
  filterApplication: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  filterCreatedBy: Type.Optional(Username),
  filterCreatedAfter: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms, inclusive' })),
  filterCreatedBefore: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch ms, exclusive' })),
  filterProvider: Type.Optional(Type.String({ maxLength: 64 })),
  filterProductId: Type.Optional(Type.String({ maxLength: 64 })),
  filterProductCategory: Type.Optional(Type.String({ maxLength: 64 })),
  filterProject: Type.Optional(ProjectId),
  filterIds: Type.Optional(
    Type.String({
      pattern: `^${JOB_ID_PATTERN.slice(1, -1)}(,${JOB_ID_PATTERN.slice(1, -1)}){0,999}$`,
      description: 'comma-separated job ids',
    }),
  ),
  hideProvider: Type.Optional(Type.String({ maxLength: 64 })),
  filterType: Type.Optional(StringEnum(['VMS_ONLY', 'JOBS_ONLY'])),
};
/** UCloud's PaginationRequestV2 and sort flags. */
const pageFlags = {
  itemsPerPage: Type.Optional(
    Type.Integer({ description: 'default 50 (also for 0 or less), at most 1000 (more is cut to 1000)' }),
  ),
  next: Type.Optional(
    Type.String({ pattern: JOB_ID_PATTERN, description: 'the `next` token of the previous page' }),
  ),
  consistency: Type.Optional(StringEnum(['PREFER', 'REQUIRE'], 'accepted; every page is consistent')),
  itemsToSkip: Type.Optional(
    Type.Integer({ minimum: 0, description: 'accepted and ignored, as UCloud does' }),
  ),
  sortBy: Type.Optional(
    Type.String({ maxLength: 64, description: 'accepted; jobs sort by creation time (createdAt) only' }),
  ),
  sortDirection: Type.Optional(StringEnum(['ascending', 'descending'], 'default: descending (newest first)')),
};

export const BrowseQuery = Type.Object({ ...pageFlags, ...includeFlags, ...filterFlags }, closed);
export const BrowseResponse = Type.Object({
  items: Type.Array(Job),
  next: Type.Union([Type.String(), Type.Null()]),
  itemsPerPage: Type.Integer(),
});

export const SearchRequest = Type.Object(
  {
    query: Type.String({ maxLength: 200, description: "text in a job's id, name or application" }),
    // The web client puts its page flags (itemsPerPage: 250) in `flags` too; the outer ones win.
    flags: Type.Optional(Type.Object({ ...pageFlags, ...includeFlags, ...filterFlags }, closed)),
    ...pageFlags,
  },
  closed,
);

export const RetrieveQuery = Type.Object({ id: JobId, ...includeFlags }, closed);

export const JobIdQuery = Type.Object({ id: JobId }, closed);

export const TerminateRequest = Type.Object(
  { ...bulkType, items: bulk(Type.Object({ id: JobId }, closed)) },
  closed,
);
export const ExtendRequest = Type.Object(
  { ...bulkType, items: bulk(Type.Object({ jobId: JobId, requestedTime: SimpleDuration }, closed)) },
  closed,
);
export const JobIdsRequest = TerminateRequest;
export const RenameRequest = Type.Object(
  {
    ...bulkType,
    items: bulk(
      Type.Object(
        { id: JobId, newTitle: Type.String({ maxLength: 200, description: 'empty: no name' }) },
        closed,
      ),
    ),
  },
  closed,
);
export const UtilizationQuery = Type.Object({ jobId: JobId }, closed);
const CpuAndMemory = Type.Object({
  cpu: Type.Number({ description: 'cores' }),
  memory: Type.Number({ description: 'bytes' }),
});
export const UtilizationResponse = Type.Object({
  capacity: CpuAndMemory,
  usedCapacity: CpuAndMemory,
  queueStatus: Type.Object({ running: Type.Integer(), pending: Type.Integer() }),
});
/** UCloud's SupportByProvider: each product (named as UCloud names it) with what it supports. */
export const ProductSupportResponse = Type.Object({
  productsByProvider: Type.Record(
    Type.String(),
    Type.Array(
      Type.Object({
        product: Type.Object({
          type: Type.Literal('compute'),
          name: Type.String(),
          category: Type.Object({ name: Type.String(), provider: Type.String() }),
          description: Type.String(),
          cpu: Type.Integer(),
          memoryInGigs: Type.Integer(),
          gpu: Type.Integer(),
          pricePerUnit: Type.Number(),
        }),
        support: ComputeSupport,
      }),
    ),
  ),
});

export const BulkEmptyResponse = Type.Object({ responses: Type.Array(Type.Object({})) });

/**
 * One WebSocket message of /api/jobs/follow (documented as its 101 response), and the payload of
 * each `{type: "message"}` of UCloud's `jobs.follow` at /api/jobs.
 */
export const FollowMessage = Type.Object(
  {
    initialJob: Type.Optional(Job),
    updates: Type.Array(JobUpdate),
    log: Type.Array(
      Type.Object({
        rank: Type.Integer(),
        stdout: Type.Optional(Type.String()),
        stderr: Type.Optional(Type.String()),
        channel: Type.Optional(Type.Null({ description: "null: the rank's own output" })),
      }),
    ),
    newStatus: Type.Optional(JobStatus),
  },
  { description: 'Switching Protocols; every WebSocket message then has this shape' },
);
export type FollowMessage = Static<typeof FollowMessage>;

export const JobEventsHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      maxLength: 100,
      description: 'The id of the last event seen (EventSource sends it when it reconnects)',
    }),
  ),
});

export const JobEventsStream = Type.String({
  description:
    'Server-sent events. `job` (data: the job as browse shows it) for each job created, changed or ' +
    'renamed; `ready` once the stream is open (or after the missed events a Last-Event-ID asked ' +
    'for); `resync` when events were lost (too far behind, or a reconnect to another server ' +
    'process): browse again. Comments every 15 s keep proxies open.',
});

// ---- catalogue and products --------------------------------------------------------------------

export const AppSummary = Type.Object({
  name: Type.String(),
  version: Type.String(),
  title: Type.String(),
  description: Type.String(),
  tags: Type.Array(Type.String()),
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
export const ReadinessResponse = Type.Object({
  ok: Type.Boolean(),
  /** The replica that runs the backend loop (holds the lease 'backend'); null while none does. */
  leader: Type.Union([
    Type.Object({ holder: Type.String(), epoch: Type.Integer(), expiresAt: Type.Integer() }),
    Type.Null(),
  ]),
});
export const UnreadyResponse = Type.Object({ ok: Type.Literal(false), error: Type.String() });
