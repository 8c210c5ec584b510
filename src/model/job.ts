import { type Static, Type } from '@sinclair/typebox';
import { SimpleDuration } from './application.ts';
import { Owner } from './owner.ts';
import { AppParameterValue, FilePath } from './parameter-value.ts';
import { ProductReference } from './product.ts';
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

export const JOB_STATES = [
  'IN_QUEUE',
  'RUNNING',
  'CANCELING',
  'SUCCESS',
  'FAILURE',
  'EXPIRED',
  'SUSPENDED',
] as const;
export const JobState = StringEnum(JOB_STATES);
export type JobState = Static<typeof JobState>;

export const FINAL_STATES: ReadonlySet<JobState> = new Set(['SUCCESS', 'FAILURE', 'EXPIRED']);
export function isFinal(state: JobState): boolean {
  return FINAL_STATES.has(state);
}

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

export const JobStatus = Type.Object({
  state: JobState,
  startedAt: Type.Optional(Type.Integer()),
  expiresAt: Type.Optional(Type.Integer()),
  exitCode: Type.Optional(Type.Record(Type.String(), Type.Integer(), { description: 'exit code per rank' })),
  allowRestart: Type.Optional(Type.Boolean()),
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
});
export type Job = Static<typeof Job>;
