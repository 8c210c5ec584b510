import type { Application, ApplicationParameter } from '../model/application.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import { clientFlags, parseClientCommand } from './args.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { CliError } from './errors.ts';
import { printJson, table } from './format.ts';
import { cliIo } from './io.ts';
import { findApplication } from './run.ts';

export const APPS_SHOW_USAGE = `Usage: ucompute apps show APP[@VERSION] [options]

Shows an application (the newest version unless VERSION is given): its title, type, description
and every parameter: name, type, whether it is mandatory, its default and its description. These
are the names that \`ucompute run\` takes as parameters.

${CLIENT_OPTIONS_USAGE}`;

export async function appsShowCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, APPS_SHOW_USAGE, {});
  if (help) return 0;
  if (positionals.length !== 1) throw new CliError(`apps show takes one APP[@VERSION]\n\n${APPS_SHOW_USAGE}`);
  const client = await connect(clientFlags(values));
  const app = await findApplication(client, positionals[0]!);
  if (values.json) printJson(app);
  else cliIo().stdout.write(describeApplication(app));
  return 0;
}

/** Whitespace (newlines of YAML blocks included) as single spaces: one table row per parameter. */
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

function describeApplication(app: Application): string {
  const m = app.metadata;
  const head = [
    `${m.name}@${m.version}: ${m.title}`,
    `type ${app.invocation.applicationType}${app.invocation.allowMultiNode ? ', multi-node' : ''}`,
    ...(m.description.trim() ? ['', oneLine(m.description)] : []),
  ].join('\n');
  const parameters = app.invocation.parameters;
  if (parameters.length === 0) return `${head}\n\nIt takes no parameters.\n`;
  const rows = parameters.map((p) => [
    p.name,
    typeOf(p),
    p.optional ? 'no' : 'yes',
    p.defaultValue !== undefined ? valueText(p.defaultValue) : '-',
    oneLine(p.description) || p.title,
  ]);
  return `${head}\n\n${table(['NAME', 'TYPE', 'MANDATORY', 'DEFAULT', 'DESCRIPTION'], rows)}`;
}

/** The type with what limits its values: `integer (1..100)`, `enumeration (fast, slow)`. */
function typeOf(p: ApplicationParameter): string {
  if (p.type === 'enumeration') return `enumeration (${p.options.map((o) => o.name).join(', ')})`;
  if ((p.type === 'integer' || p.type === 'floating_point') && (p.min !== undefined || p.max !== undefined)) {
    return `${p.type} (${p.min ?? ''}..${p.max ?? ''})`;
  }
  return p.type;
}

function valueText(v: AppParameterValue): string {
  switch (v.type) {
    case 'file':
      return v.path;
    case 'peer':
      return `${v.hostname}=${v.jobId}`;
    case 'license_server':
    case 'network':
    case 'ingress':
      return v.id;
    case 'workflow':
      return v.specification.job ?? '';
    default:
      return String(v.value);
  }
}
