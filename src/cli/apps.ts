import { parseArgs } from 'node:util';
import { buildCatalog, formatCatalogIssue, readCatalogFiles } from '../catalog/catalog.ts';
import { CliError } from './errors.ts';

export const APPS_VALIDATE_USAGE = `Usage: ucompute apps validate DIR

Checks every application and tool document (UCloud YAML v1) under DIR and reports each problem
with its file, line, document and field. Exits 1 when there is any.`;

export async function appsValidateCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(`${APPS_VALIDATE_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) throw new CliError(APPS_VALIDATE_USAGE);
  const files = await readCatalogFiles(positionals[0]!);
  const { catalog, issues } = buildCatalog(files);
  for (const issue of issues) process.stderr.write(`${formatCatalogIssue(issue)}\n`);
  const apps = catalog.list().length;
  if (issues.length > 0) {
    process.stderr.write(
      `${issues.length} problem${issues.length === 1 ? '' : 's'} in ${files.length} files\n`,
    );
    return 1;
  }
  process.stdout.write(`${apps} application${apps === 1 ? '' : 's'} in ${files.length} files: all valid\n`);
  return 0;
}
