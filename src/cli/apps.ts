import { parseCommandLine } from './args.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const APPS_VALIDATE_USAGE = `Usage: ucompute apps validate DIR

Checks every application and tool document (UCloud YAML v1) under DIR and reports each problem
with its file, line, document and field. Exits 1 when there is any. Fields UCloud ignores (unknown
keys, legacy spellings such as default_value) are ignored here too, each with a warning line.`;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export async function appsValidateCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseCommandLine(
    argv,
    { help: { type: 'boolean', short: 'h' } },
    APPS_VALIDATE_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${APPS_VALIDATE_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) throw new CliError(APPS_VALIDATE_USAGE);
  // The catalogue's parser and schemas (yaml, typebox: ~300 modules) load only for a validation:
  // the client commands import this module for its usage text.
  const { buildCatalog, formatCatalogIssue, readCatalogFiles } = await import('../catalog/catalog.ts');
  const files = await readCatalogFiles(positionals[0]!);
  const { catalog, issues, warnings } = buildCatalog(files);
  for (const warning of warnings) cliIo().stderr.write(`${formatCatalogIssue(warning, 'warning')}\n`);
  for (const issue of issues) cliIo().stderr.write(`${formatCatalogIssue(issue)}\n`);
  const warned = warnings.length > 0 ? ` (${plural(warnings.length, 'warning')})` : '';
  if (issues.length > 0) {
    cliIo().stderr.write(`${plural(issues.length, 'problem')} in ${files.length} files${warned}\n`);
    return 1;
  }
  const apps = catalog.list().length;
  cliIo().stdout.write(`${plural(apps, 'application')} in ${files.length} files: all valid${warned}\n`);
  return 0;
}
