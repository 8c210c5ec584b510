import { type Static, Type } from '@sinclair/typebox';
import { SimpleDuration } from '../model/application.ts';
import { closed, StringEnum, TaggedUnion } from '../model/schema.ts';
import { parser } from '../model/validate.ts';

/**
 * UCloud's YAML v1 documents (`application: v1`, `tool: v1`) as they are written: the fields of
 * UCloud's readers (the Kotlin app store's `ApplicationYaml.V1`/`ToolYaml.V1`, core2's
 * `A1Yaml`/`A1Tool`). `yaml-v1.ts` turns them into the normalised model.
 */

const Scalar = Type.Union([Type.String(), Type.Number(), Type.Boolean()]);
const Text = Type.String();
// Numbers written where text is expected arrive here as their source text (see lenient-read.ts).
const ONE_LINE = '^[^\\n]*\\S[^\\n]*$';
const NameText = Type.String({
  pattern: ONE_LINE,
  maxLength: 255,
  description: 'one line of text, not blank',
});
export const VARIABLE_NAME = '^[A-Za-z_][A-Za-z0-9_-]*$';
const VariableName = Type.String({
  pattern: VARIABLE_NAME,
  description: 'a name of letters, digits, _ and -',
});

const RawVar = Type.Object(
  {
    type: Type.Literal('var'),
    vars: Type.Union([VariableName, Type.Array(VariableName, { minItems: 1 })]),
    prefixGlobal: Type.Optional(Scalar),
    suffixGlobal: Type.Optional(Scalar),
    prefixVariable: Type.Optional(Scalar),
    suffixVariable: Type.Optional(Scalar),
    isPrefixVariablePartOfArg: Type.Optional(Type.Boolean()),
    isSuffixVariablePartOfArg: Type.Optional(Type.Boolean()),
  },
  closed,
);
const RawFlag = Type.Object({ type: Type.Literal('flag'), var: VariableName, flag: Scalar }, closed);
const RawEnv = Type.Object({ type: Type.Literal('env'), var: Type.String({ minLength: 1 }) }, closed);
const RawWord = Type.Object({ type: Type.Literal('word'), word: Scalar }, closed);
const RawInvocationObject = TaggedUnion('type', [RawVar, RawFlag, RawEnv, RawWord]);
const RawInvocationItem = Type.Union([Scalar, RawInvocationObject]);
export type RawInvocationItem = Static<typeof RawInvocationItem>;

const paramCommon = {
  optional: Type.Optional(Type.Boolean()),
  title: Type.Optional(Text),
  description: Type.Optional(Text),
  defaultValue: Type.Optional(Type.Unknown()),
};
/** Text defaults: a number written there is read as its text, as for every text field. */
const textDefault = { defaultValue: Type.Optional(Type.Union([Text, Type.Unknown()])) };
const numeric = {
  min: Type.Optional(Type.Number()),
  max: Type.Optional(Type.Number()),
  step: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  unitName: Type.Optional(Text),
};
const RawParameter = TaggedUnion('type', [
  Type.Object({ type: Type.Literal('input_file'), ...paramCommon }, closed),
  Type.Object({ type: Type.Literal('input_directory'), ...paramCommon }, closed),
  Type.Object({ type: Type.Literal('text'), ...paramCommon, ...textDefault }, closed),
  Type.Object({ type: Type.Literal('textarea'), ...paramCommon, ...textDefault }, closed),
  Type.Object({ type: Type.Literal('integer'), ...paramCommon, ...numeric }, closed),
  Type.Object({ type: Type.Literal('floating_point'), ...paramCommon, ...numeric }, closed),
  Type.Object(
    {
      type: Type.Literal('boolean'),
      ...paramCommon,
      trueValue: Type.Optional(Scalar),
      falseValue: Type.Optional(Scalar),
    },
    closed,
  ),
  Type.Object(
    {
      type: Type.Literal('enumeration'),
      ...paramCommon,
      ...textDefault,
      options: Type.Array(Type.Object({ name: Scalar, value: Scalar }, closed), { minItems: 1 }),
    },
    closed,
  ),
  Type.Object(
    { type: Type.Literal('peer'), ...paramCommon, suggestedApplication: Type.Optional(Text) },
    closed,
  ),
  Type.Object(
    { type: Type.Literal('license_server'), ...paramCommon, tagged: Type.Optional(Type.Array(Text)) },
    closed,
  ),
  Type.Object({ type: Type.Literal('ingress'), ...paramCommon }, closed),
  Type.Object({ type: Type.Literal('network_ip'), ...paramCommon }, closed),
]);
export type RawParameter = Static<typeof RawParameter>;

const Port = Type.Integer({ minimum: 1, maximum: 65535 });

/** What application and tool documents both start with. */
const documentHeader = {
  name: NameText,
  version: NameText,
  title: Type.String({ pattern: ONE_LINE, maxLength: 1024, description: 'one line of text, not blank' }),
  authors: Type.Array(Type.String({ pattern: '^[^\\n]*$', description: 'one line of text' }), {
    minItems: 1,
  }),
};

export const RawApplication = Type.Object(
  {
    application: Type.Literal('v1'),
    ...documentHeader,
    description: Text,
    tags: Type.Optional(Type.Array(Text)),
    website: Type.Optional(Text),
    tool: Type.Object({ name: NameText, version: NameText }, closed),
    applicationType: Type.Optional(StringEnum(['BATCH', 'VNC', 'WEB'])),
    // UCloud's examples have `invocation: []`: the image's own command runs.
    invocation: Type.Array(RawInvocationItem),
    parameters: Type.Optional(Type.Union([Type.Record(Type.String(), RawParameter), Type.Null()])),
    environment: Type.Optional(Type.Union([Type.Record(Type.String(), RawInvocationItem), Type.Null()])),
    container: Type.Optional(
      Type.Object(
        {
          changeWorkingDirectory: Type.Optional(Type.Boolean()),
          runAsRoot: Type.Optional(Type.Boolean()),
          runAsRealUser: Type.Optional(Type.Boolean()),
        },
        closed,
      ),
    ),
    vnc: Type.Optional(Type.Object({ password: Type.Optional(Text), port: Type.Optional(Port) }, closed)),
    web: Type.Optional(Type.Object({ port: Type.Optional(Port) }, closed)),
    ssh: Type.Optional(Type.Object({ mode: StringEnum(['DISABLED', 'OPTIONAL', 'MANDATORY']) }, closed)),
    allowAdditionalMounts: Type.Optional(Type.Boolean()),
    allowAdditionalPeers: Type.Optional(Type.Boolean()),
    allowMultiNode: Type.Optional(Type.Boolean()),
    allowPublicIp: Type.Optional(Type.Boolean()),
    allowPublicLink: Type.Optional(Type.Boolean()),
    fileExtensions: Type.Optional(Type.Array(Text)),
    outputFileGlobs: Type.Optional(Type.Array(Text)),
    licenseServers: Type.Optional(Type.Array(Text)),
  },
  closed,
);
export type RawApplication = Static<typeof RawApplication>;

export const RawTool = Type.Object(
  {
    tool: Type.Literal('v1'),
    ...documentHeader,
    description: Type.Optional(Text),
    container: Type.Optional(Type.String({ minLength: 1 })),
    image: Type.Optional(Type.String({ minLength: 1 })),
    backend: StringEnum(['DOCKER', 'UDOCKER', 'SINGULARITY', 'VIRTUAL_MACHINE', 'NATIVE']),
    defaultMaxTime: Type.Optional(SimpleDuration),
    defaultTimeAllocation: Type.Optional(SimpleDuration),
    defaultNumberOfNodes: Type.Optional(Type.Integer({ minimum: 1 })),
    requiredModules: Type.Optional(Type.Array(Text)),
    supportedProviders: Type.Optional(Type.Array(Text)),
    license: Type.Optional(Text),
  },
  closed,
);

export const rawApplication = parser(RawApplication);
export const rawTool = parser(RawTool);
