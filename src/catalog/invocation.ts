import type { Application, ApplicationParameter, InvocationParameter } from '../model/application.ts';
import type { LicenseServer } from '../model/config.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import { baseName } from '../model/paths.ts';

/**
 * Renders an application's invocation into an argv list (no shell is involved) and its
 * `environment` map into environment variables, following UCloud's InvocationParameter rules.
 *
 * The output is in Kubernetes' expansion syntax, as container command and env values are:
 * `$(NAME)` is a reference to the container's environment (our `type: env` items) and `$$` is a
 * literal `$`. Everything else is escaped, so that words and user values arrive as written.
 */

/** Text that Kubernetes passes through unchanged: every `$` doubled. */
export function literal(text: string): string {
  return text.includes('$') ? text.replace(/\$/g, () => '$$') : text;
}

export interface RenderOptions {
  /** How a license server id becomes `address:port[/license]`. */
  licenseAddress?: (id: string) => string | undefined;
}

/** RenderOptions.licenseAddress for the operator's license servers. */
export function licenseAddressIn(servers: readonly LicenseServer[]): (id: string) => string | undefined {
  return (id) => {
    const server = servers.find((s) => s.id === id);
    return server && `${server.address}:${server.port}${server.license ? `/${server.license}` : ''}`;
  };
}

/** One parameter value as text, or undefined when it contributes nothing. */
export function renderValue(
  parameter: ApplicationParameter | undefined,
  value: AppParameterValue,
  options: RenderOptions,
): string | undefined {
  switch (value.type) {
    case 'file':
      return `/work/${baseName(value.path)}`;
    case 'boolean': {
      if (parameter?.type !== 'boolean') return String(value.value);
      const text = value.value ? parameter.trueValue : parameter.falseValue;
      return text === '' ? undefined : text;
    }
    case 'text':
      if (parameter?.type === 'enumeration') {
        return (parameter.options.find((o) => o.value === value.value) ?? { value: value.value }).value;
      }
      return value.value;
    case 'textarea':
      return value.value;
    case 'integer':
    case 'floating_point':
      return String(value.value);
    case 'peer':
      return value.hostname;
    case 'license_server':
      return options.licenseAddress?.(value.id) ?? value.id;
    case 'network':
    case 'ingress':
      return value.id;
  }
}

/** Renders one invocation item to zero or more pieces. */
function renderItem(
  item: InvocationParameter,
  parameters: ReadonlyMap<string, ApplicationParameter>,
  values: Readonly<Record<string, AppParameterValue>>,
  options: RenderOptions,
): string[] {
  const renderedValue = (name: string): string | undefined => {
    const value = values[name];
    const text = value === undefined ? undefined : renderValue(parameters.get(name), value, options);
    return text === undefined ? undefined : literal(text);
  };
  switch (item.type) {
    case 'jinja':
      throw new Error('a Jinja invocation is rendered whole, as a script (./jinja-script.ts)');
    case 'word':
      return [literal(item.word)];
    case 'env':
      // Kubernetes expands $(NAME) from the container's environment, in command and in env values.
      return [`$(${item.variable})`];
    case 'bool_flag': {
      const value = values[item.variableName];
      return value?.type === 'boolean' && value.value && item.flag !== '' ? [literal(item.flag)] : [];
    }
    case 'var': {
      const rendered = item.variableNames.map(renderedValue).filter((v): v is string => v !== undefined);
      if (rendered.length === 0) return [];
      const out: string[] = [];
      const prefixGlobal = literal(item.prefixGlobal);
      const suffixGlobal = literal(item.suffixGlobal);
      const prefixVariable = literal(item.prefixVariable);
      const suffixVariable = literal(item.suffixVariable);
      if (prefixGlobal !== '') out.push(prefixGlobal);
      for (const v of rendered) {
        let arg = v;
        if (prefixVariable !== '') {
          if (item.isPrefixVariablePartOfArg) arg = prefixVariable + arg;
          else out.push(prefixVariable);
        }
        if (suffixVariable !== '' && item.isSuffixVariablePartOfArg) arg += suffixVariable;
        out.push(arg);
        if (suffixVariable !== '' && !item.isSuffixVariablePartOfArg) out.push(suffixVariable);
      }
      if (suffixGlobal !== '') out.push(suffixGlobal);
      return out;
    }
  }
}

export function renderCommand(
  app: Application,
  values: Readonly<Record<string, AppParameterValue>>,
  options: RenderOptions = {},
): string[] {
  const parameters = parameterMap(app);
  return app.invocation.invocation.flatMap((item) => renderItem(item, parameters, values, options));
}

/** Environment values are the rendered pieces joined by spaces; an empty result sets nothing. */
export function renderEnvironment(
  app: Application,
  values: Readonly<Record<string, AppParameterValue>>,
  options: RenderOptions = {},
): Record<string, string> {
  const parameters = parameterMap(app);
  const env: Record<string, string> = {};
  for (const [name, item] of Object.entries(app.invocation.environment)) {
    const text = renderItem(item, parameters, values, options).join(' ');
    if (text !== '') env[name] = text;
  }
  return env;
}

const parameterMaps = new WeakMap<Application, Map<string, ApplicationParameter>>();
function parameterMap(app: Application): Map<string, ApplicationParameter> {
  let map = parameterMaps.get(app);
  if (!map) {
    map = new Map(app.invocation.parameters.map((p) => [p.name, p]));
    parameterMaps.set(app, map);
  }
  return map;
}
