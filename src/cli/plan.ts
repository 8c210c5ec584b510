import { readFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { loadCatalog } from '../catalog/catalog.ts';
import { loadProducts } from '../catalog/products.ts';
import { planJob } from '../jobs/plan.ts';
import { ValidationError } from '../model/errors.ts';
import { isJobId, newJobId } from '../model/ids.ts';
import { PROJECT_ID_PATTERN, USERNAME_PATTERN } from '../model/owner.ts';
import { parseCommandLine } from './args.ts';
import { loadPipelineConfig } from './config-file.ts';
import { EXAMPLE_APPS, EXAMPLE_PRODUCTS } from './defaults.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const PLAN_USAGE = `Usage: ucompute plan SPEC.json [options]

Prints the Kubernetes objects a job specification becomes, without running it:
the Volcano Job first, then its companion objects.

Options:
  --apps DIR          catalogue folder (default: the example catalogue); repeat it for several
  --products FILE     products YAML, a document "products: [...]" (default: the examples)
  --config FILE       ucompute configuration YAML
  --user NAME         the user who submits the job (default: local)
  --project ID        submit in this project's workspace
  --job-id ID         the job id to plan with (default: a new one)
  --output yaml|json  output format (default: yaml)`;

// YAML 1.1 quoting ("yes", "on") keeps kubectl and other 1.1 readers from seeing booleans.
const YAML_OPTIONS = { lineWidth: 0, version: '1.1', aliasDuplicateObjects: false } as const;

export async function planCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    {
      apps: { type: 'string', multiple: true },
      products: { type: 'string' },
      config: { type: 'string' },
      user: { type: 'string', default: 'local' },
      project: { type: 'string' },
      'job-id': { type: 'string' },
      output: { type: 'string', default: 'yaml' },
      help: { type: 'boolean', short: 'h' },
    },
    PLAN_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${PLAN_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) throw new CliError(`plan takes one SPEC.json\n\n${PLAN_USAGE}`);
  if (values.output !== 'yaml' && values.output !== 'json')
    throw new CliError('--output must be yaml or json');
  if (!new RegExp(USERNAME_PATTERN).test(values.user))
    throw new CliError(`--user: ${values.user} is not a valid user name`);
  if (values.project !== undefined && !new RegExp(PROJECT_ID_PATTERN).test(values.project)) {
    throw new CliError(`--project: ${values.project} is not a valid project id`);
  }
  const jobId = values['job-id'] ?? newJobId();
  if (!isJobId(jobId)) throw new CliError(`--job-id: ${jobId} must be 1 to 40 lower-case letters and digits`);

  const specPath = positionals[0]!;
  const text = await readFile(specPath, 'utf8');
  let specification: unknown;
  try {
    specification = JSON.parse(text);
  } catch (e) {
    throw new ValidationError([{ path: specPath, message: `is not valid JSON: ${(e as Error).message}` }]);
  }

  const [catalog, products, config] = await Promise.all([
    loadCatalog(values.apps ?? EXAMPLE_APPS),
    loadProducts(values.products ?? EXAMPLE_PRODUCTS),
    loadPipelineConfig(values.config),
  ]);
  const owner = {
    createdBy: values.user,
    ...(values.project !== undefined ? { project: values.project } : {}),
  };
  const objects = await planJob(
    specification,
    { id: jobId, owner, createdAt: Date.now() },
    { catalog, products, config },
  );

  if (values.output === 'json') cliIo().stdout.write(`${JSON.stringify(objects, null, 2)}\n`);
  else cliIo().stdout.write(objects.map((o) => stringify(o, YAML_OPTIONS)).join('---\n'));
  return 0;
}
