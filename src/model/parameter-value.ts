import { type Static, Type } from '@sinclair/typebox';
import { JOB_ID_PATTERN } from './ids.ts';
import { closed, TaggedUnion } from './schema.ts';

/** The values a job gives its parameters and resources (UCloud's AppParameterValue, tagged by `type`). */
export const FilePath = Type.String({
  minLength: 1,
  maxLength: 4096,
  pattern: '^/',
  description: 'an absolute path',
});
export const AppParameterValue = TaggedUnion('type', [
  Type.Object(
    { type: Type.Literal('file'), path: FilePath, readOnly: Type.Optional(Type.Boolean()) },
    closed,
  ),
  Type.Object({ type: Type.Literal('boolean'), value: Type.Boolean() }, closed),
  Type.Object({ type: Type.Literal('text'), value: Type.String({ maxLength: 65536 }) }, closed),
  Type.Object({ type: Type.Literal('textarea'), value: Type.String({ maxLength: 1048576 }) }, closed),
  Type.Object({ type: Type.Literal('integer'), value: Type.Integer() }, closed),
  Type.Object({ type: Type.Literal('floating_point'), value: Type.Number() }, closed),
  Type.Object(
    {
      type: Type.Literal('peer'),
      hostname: Type.String({
        pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$',
        description: 'a host name (lower-case letters, digits and -)',
      }),
      // The id ends up in label values of network policies.
      jobId: Type.String({
        pattern: JOB_ID_PATTERN,
        description: 'a job id (1 to 40 lower-case letters and digits)',
      }),
    },
    closed,
  ),
  Type.Object({ type: Type.Literal('license_server'), id: Type.String({ minLength: 1 }) }, closed),
  Type.Object({ type: Type.Literal('network'), id: Type.String({ minLength: 1 }) }, closed),
  Type.Object({ type: Type.Literal('ingress'), id: Type.String({ minLength: 1 }) }, closed),
  // A user-written job script for an `application: v2` app's Workflow parameter (UCloud's
  // WorkflowSpecification, provider-integration/shared/pkg/orchestrators/workflows.go): `job` is
  // Jinja appended to the app's template, `inputs` are ApplicationParameters (UCloud's JSON) whose
  // values the job gives beside the app's own.
  Type.Object(
    {
      type: Type.Literal('workflow'),
      specification: Type.Object({
        applicationName: Type.Optional(Type.String()),
        language: Type.Optional(Type.String()),
        init: Type.Optional(Type.Union([Type.String({ maxLength: 1048576 }), Type.Null()])),
        job: Type.Optional(Type.Union([Type.String({ maxLength: 1048576 }), Type.Null()])),
        readme: Type.Optional(Type.Union([Type.String({ maxLength: 1048576 }), Type.Null()])),
        inputs: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 100 })),
      }),
    },
    closed,
  ),
]);
export type AppParameterValue = Static<typeof AppParameterValue>;
export type AppParameterValueOf<T extends AppParameterValue['type']> = Extract<
  AppParameterValue,
  { type: T }
>;
