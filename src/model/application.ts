import { type Static, Type } from '@sinclair/typebox';
import { AppParameterValue } from './parameter-value.ts';
import { StringEnum, TaggedUnion } from './schema.ts';

/**
 * The normalised application model (UCloud's NormalizedApplication). YAML v1 documents are turned
 * into this by the catalogue; everything downstream reads only this shape.
 */

export const NameAndVersion = Type.Object({ name: Type.String(), version: Type.String() });
export type NameAndVersion = Static<typeof NameAndVersion>;

// Invocation items: how parameters become argv entries or environment values.
const WordParameter = Type.Object({ type: Type.Literal('word'), word: Type.String() });
const VariableParameter = Type.Object({
  type: Type.Literal('var'),
  variableNames: Type.Array(Type.String(), { minItems: 1 }),
  prefixGlobal: Type.String(),
  suffixGlobal: Type.String(),
  prefixVariable: Type.String(),
  suffixVariable: Type.String(),
  isPrefixVariablePartOfArg: Type.Boolean(),
  isSuffixVariablePartOfArg: Type.Boolean(),
});
const BooleanFlagParameter = Type.Object({
  type: Type.Literal('bool_flag'),
  variableName: Type.String(),
  flag: Type.String(),
});
const EnvironmentParameter = Type.Object({ type: Type.Literal('env'), variable: Type.String() });
/** An `application: v2` invocation: a Jinja template of a bash script (UCloud's InvocationParameterJinja). */
const JinjaParameter = Type.Object({ type: Type.Literal('jinja'), template: Type.String() });
export const InvocationParameter = TaggedUnion('type', [
  WordParameter,
  VariableParameter,
  BooleanFlagParameter,
  EnvironmentParameter,
  JinjaParameter,
]);
export type InvocationParameter = Static<typeof InvocationParameter>;
export type VariableParameter = Static<typeof VariableParameter>;

const common = {
  name: Type.String(),
  optional: Type.Boolean(),
  title: Type.String(),
  description: Type.String(),
  defaultValue: Type.Optional(AppParameterValue),
};
const EnumOption = Type.Object({ name: Type.String(), value: Type.String() });
export const ApplicationParameter = TaggedUnion('type', [
  Type.Object({ type: Type.Literal('input_file'), ...common }),
  Type.Object({ type: Type.Literal('input_directory'), ...common }),
  Type.Object({ type: Type.Literal('text'), ...common }),
  Type.Object({ type: Type.Literal('textarea'), ...common }),
  Type.Object({
    type: Type.Literal('integer'),
    ...common,
    min: Type.Optional(Type.Integer()),
    max: Type.Optional(Type.Integer()),
    step: Type.Optional(Type.Integer()),
    unitName: Type.Optional(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('floating_point'),
    ...common,
    min: Type.Optional(Type.Number()),
    max: Type.Optional(Type.Number()),
    step: Type.Optional(Type.Number()),
    unitName: Type.Optional(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('boolean'),
    ...common,
    trueValue: Type.String(),
    falseValue: Type.String(),
  }),
  Type.Object({ type: Type.Literal('enumeration'), ...common, options: Type.Array(EnumOption) }),
  Type.Object({ type: Type.Literal('peer'), ...common, suggestedApplication: Type.Optional(Type.String()) }),
  Type.Object({ type: Type.Literal('license_server'), ...common, tagged: Type.Array(Type.String()) }),
  Type.Object({ type: Type.Literal('ingress'), ...common }),
  Type.Object({ type: Type.Literal('network_ip'), ...common }),
]);
export type ApplicationParameter = Static<typeof ApplicationParameter>;
export type ApplicationParameterType = ApplicationParameter['type'];

export const ApplicationType = StringEnum(['BATCH', 'VNC', 'WEB']);
export type ApplicationType = Static<typeof ApplicationType>;
export const SshMode = StringEnum(['DISABLED', 'OPTIONAL', 'MANDATORY']);

export const Application = Type.Object({
  metadata: Type.Object({
    name: Type.String(),
    version: Type.String(),
    title: Type.String(),
    authors: Type.Array(Type.String()),
    description: Type.String(),
    tags: Type.Array(Type.String()),
    website: Type.Optional(Type.String()),
  }),
  invocation: Type.Object({
    tool: NameAndVersion,
    invocation: Type.Array(InvocationParameter),
    parameters: Type.Array(ApplicationParameter),
    environment: Type.Record(Type.String(), InvocationParameter),
    applicationType: ApplicationType,
    web: Type.Optional(Type.Object({ port: Type.Integer() })),
    vnc: Type.Optional(Type.Object({ port: Type.Integer(), password: Type.Optional(Type.String()) })),
    ssh: Type.Object({ mode: SshMode }),
    container: Type.Object({
      changeWorkingDirectory: Type.Boolean(),
      runAsRoot: Type.Boolean(),
      runAsRealUser: Type.Boolean(),
    }),
    allowAdditionalMounts: Type.Boolean(),
    allowAdditionalPeers: Type.Boolean(),
    allowMultiNode: Type.Boolean(),
    fileExtensions: Type.Array(Type.String()),
    outputFileGlobs: Type.Array(Type.String()),
  }),
});
export type Application = Static<typeof Application>;

export const SimpleDuration = Type.Object(
  {
    hours: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
    minutes: Type.Integer({ minimum: 0, maximum: 59 }),
    seconds: Type.Integer({ minimum: 0, maximum: 59 }),
  },
  { additionalProperties: false },
);
export type SimpleDuration = Static<typeof SimpleDuration>;

export function durationMillis(d: SimpleDuration): number {
  return ((d.hours * 60 + d.minutes) * 60 + d.seconds) * 1000;
}

export const Tool = Type.Object({
  name: Type.String(),
  version: Type.String(),
  title: Type.String(),
  description: Type.String(),
  authors: Type.Array(Type.String()),
  image: Type.String(),
  /** Always DOCKER: ucompute runs containers. */
  backend: Type.Literal('DOCKER'),
  defaultNumberOfNodes: Type.Integer({ minimum: 1 }),
  defaultTimeAllocation: Type.Optional(SimpleDuration),
  license: Type.Optional(Type.String()),
});
export type Tool = Static<typeof Tool>;

/** An application with its tool resolved: what a job actually runs. */
export interface ResolvedApplication {
  application: Application;
  tool: Tool;
}
