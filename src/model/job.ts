import { type Static, Type } from '@sinclair/typebox';
import { Application, SimpleDuration, Tool } from './application.ts';
import { JOB_STATES } from './job-states.ts';
import { JobOutcome } from './outcome.ts';
import { Owner } from './owner.ts';
import { AppParameterValue, FilePath } from './parameter-value.ts';
import { Product, ProductReference } from './product.ts';
import { closed, StringEnum } from './schema.ts';

export const JOB_NAME_PATTERN = '^[\\w ():_-]+$';

export const JobSpecification = Type.Object(
  {
    application: Type.Object(
      { name: Type.String({ minLength: 1 }), version: Type.String({ minLength: 1 }) },
      closed,
    ),
    product: ProductReference,
    name: Type.Optional(
      Type.String({
        maxLength: 200,
        pattern: JOB_NAME_PATTERN,
        description: 'letters, digits, spaces and ():_-',
      }),
    ),
    replicas: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    parameters: Type.Optional(Type.Record(Type.String(), AppParameterValue)),
    resources: Type.Optional(Type.Array(AppParameterValue, { maxItems: 1000 })),
    timeAllocation: Type.Optional(Type.Union([SimpleDuration, Type.Null()])),
    openedFile: Type.Optional(FilePath),
    restartOnExit: Type.Optional(Type.Boolean()),
    sshEnabled: Type.Optional(Type.Boolean()),
    allowDuplicateJob: Type.Optional(Type.Boolean()),
  },
  closed,
);
export type JobSpecification = Static<typeof JobSpecification>;

export const JobState = StringEnum(JOB_STATES);
export type JobState = Static<typeof JobState>;

export const JobUpdate = Type.Object({
  timestamp: Type.Integer(),
  state: Type.Optional(JobState),
  status: Type.Optional(Type.String()),
  outputFolder: Type.Optional(Type.String()),
  newTimeAllocation: Type.Optional(Type.Integer()),
  expectedState: Type.Optional(JobState),
  expectedDifferentState: Type.Optional(Type.Boolean()),
  allowRestart: Type.Optional(Type.Boolean()),
  newMounts: Type.Optional(Type.Array(Type.String())),
});
export type JobUpdate = Static<typeof JobUpdate>;

/** UCloud's Application as its clients read it: the tool itself at `invocation.tool.tool`. */
export const ResolvedApplication = Type.Object({
  metadata: Application.properties.metadata,
  invocation: Type.Composite([
    Type.Omit(Application.properties.invocation, ['tool']),
    Type.Object({
      tool: Type.Object({ name: Type.String(), version: Type.String(), tool: Tool }),
    }),
  ]),
});
export type ResolvedApplication = Static<typeof ResolvedApplication>;

/** What a provider offers for a product (UCloud's ComputeSupport; ucompute runs containers only). */
export const ComputeSupport = Type.Object({
  product: Type.Object({ id: Type.String(), category: Type.String(), provider: Type.String() }),
  docker: Type.Object({
    enabled: Type.Boolean(),
    web: Type.Boolean(),
    vnc: Type.Boolean(),
    logs: Type.Boolean(),
    terminal: Type.Boolean(),
    peers: Type.Boolean(),
    timeExtension: Type.Boolean(),
    utilization: Type.Boolean(),
  }),
  virtualMachine: Type.Object({ enabled: Type.Boolean(), suspension: Type.Boolean() }),
  native: Type.Object({ enabled: Type.Boolean() }),
});
export type ComputeSupport = Static<typeof ComputeSupport>;

/**
 * UCloud's ExportedParameters (the JobParameters.json of a job): the request as it was resolved,
 * for "run again" and for the job itself.
 */
export const ExportedParameters = Type.Object({
  siteVersion: Type.Integer(),
  request: Type.Object({
    application: Type.Object({ name: Type.String(), version: Type.String() }),
    product: ProductReference,
    name: Type.Optional(Type.String()),
    replicas: Type.Integer(),
    parameters: Type.Record(Type.String(), AppParameterValue),
    resources: Type.Array(AppParameterValue),
    timeAllocation: Type.Union([SimpleDuration, Type.Null()]),
    resolvedProduct: Type.Union([Product, Type.Null()]),
    allowDuplicateJob: Type.Boolean(),
    sshEnabled: Type.Boolean(),
  }),
  resolvedResources: Type.Object({ ingress: Type.Record(Type.String(), Type.Unknown()) }),
  machineType: Type.Object({ cpu: Type.Integer(), memoryInGigs: Type.Integer(), gpu: Type.Integer() }),
});
export type ExportedParameters = Static<typeof ExportedParameters>;

export const JobStatus = Type.Object({
  state: JobState,
  startedAt: Type.Optional(Type.Integer()),
  expiresAt: Type.Optional(Type.Integer()),
  exitCode: Type.Optional(Type.Record(Type.String(), Type.Integer(), { description: 'exit code per rank' })),
  /** How a final job ended (an addition to UCloud's shape); absent while the job is active. */
  outcome: Type.Optional(JobOutcome),
  allowRestart: Type.Optional(Type.Boolean()),
  jobParametersJson: Type.Optional(ExportedParameters),
  resolvedApplication: Type.Optional(ResolvedApplication),
  resolvedProduct: Type.Optional(Product),
  resolvedSupport: Type.Optional(Type.Object({ product: Product, support: ComputeSupport })),
});
export type JobStatus = Static<typeof JobStatus>;

export const Job = Type.Object({
  id: Type.String(),
  owner: Owner,
  specification: JobSpecification,
  status: JobStatus,
  updates: Type.Array(JobUpdate, { minItems: 1 }),
  createdAt: Type.Integer(),
  output: Type.Object({ outputFolder: Type.Optional(Type.String()) }),
  billing: Type.Object({ creditsCharged: Type.Number(), pricePerUnit: Type.Number() }),
  permissions: Type.Optional(
    Type.Object({
      myself: Type.Array(StringEnum(['READ', 'EDIT', 'ADMIN'])),
      others: Type.Array(Type.Unknown(), { description: 'no access lists are offered: always empty' }),
    }),
  ),
});
export type Job = Static<typeof Job>;
