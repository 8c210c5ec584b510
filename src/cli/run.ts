import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Application, ApplicationParameter } from '../model/application.ts';
import type { Job, JobSpecification } from '../model/job.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import type { Product } from '../model/product.ts';
import { parseCommandLine } from './args.ts';
import { ApiError, CLIENT_OPTIONS, CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { finalOutcome, followJob, waitForJob } from './follow.ts';
import { listOf, parseDuration, printJson } from './format.ts';
import { cliIo } from './io.ts';
import { EXIT_CODES_USAGE } from './outcome.ts';

export const RUN_USAGE = `Usage: ucompute run APP[@VERSION] [options]

Submits one job and prints its id. VERSION defaults to the newest version of APP.

Options:
  --param NAME=VALUE    a parameter value, converted by the parameter's type (repeatable):
                          integer, floating_point   a number: top=25, ratio=0.5
                          boolean                   true, false, yes or no
                          text, textarea            the text as given
                          enumeration               an option's name or its value
                          input_file/_directory     a storage path: input=/home/alice/data.csv
                          peer                      HOST=JOBID: the job JOBID is reachable as HOST
                          license_server            the license server's id
                          workflow                  the job script (Jinja), or @FILE to read it
                                                    from a local file; a workflow's own inputs
                                                    are given through the API
  --file NAME=PATH[:ro] a file or folder parameter; PATH is a storage path (/home/<user>/...,
                        /projects/<id>/...); ":ro" mounts it read-only (repeatable)
  --mount PATH[:ro]     also mount a folder (or file) of your drives or your projects' drives at
                        /work/<its name>, read-only with ":ro" (repeatable; for applications that
                        allow additional folders: the interactive ones mount your drive, the job's
                        workspace drive, at /work/<drive name> by themselves)
  --product ID          machine type, or CATEGORY/ID (default: the first of \`ucompute products\`)
  --replicas N          number of replicas (default 1)
  --time DURATION       time limit: 45s, 90m, 2h, 1h30m, 1d (default: the tool's)
  --name NAME           a name for the job
  --project ID          run in this project's workspace
  --wait                wait until the job ends and print its state and outcome
                        ("SUCCESS, cancelled by alice"); exit codes below
  --follow              stream the job's logs (stdout) and updates (stderr) until it ends; the
                        final state goes to stderr; exit code as with --wait

${CLIENT_OPTIONS_USAGE}
With --json and --wait or --follow, each response is one line of JSON: the submission, then the
final job (--wait) or every message of the follow stream (--follow).

${EXIT_CODES_USAGE}`;

/** Splits `NAME=VALUE` at the first `=`. */
function splitAssignment(text: string, flag: string): [string, string] {
  const i = text.indexOf('=');
  if (i <= 0) throw new CliError(`${flag} ${text}: must be NAME=VALUE`);
  return [text.slice(0, i), text.slice(i + 1)];
}

function parameterNamed(app: Application, name: string, flag: string): ApplicationParameter {
  const parameter = app.invocation.parameters.find((p) => p.name === name);
  if (!parameter) {
    const names = app.invocation.parameters.map((p) => p.name);
    throw new CliError(
      `${flag} ${name}: ${app.metadata.name}@${app.metadata.version} has no parameter ${name}` +
        ` (${names.length ? `its parameters: ${names.join(', ')}` : 'it takes none'})`,
    );
  }
  return parameter;
}

/** One `--param NAME=VALUE`, typed by the application's parameter of that name. */
export function parameterValue(parameter: ApplicationParameter, text: string): AppParameterValue {
  const where = `--param ${parameter.name}`;
  switch (parameter.type) {
    case 'integer': {
      if (!/^[+-]?\d+$/.test(text.trim())) throw new CliError(`${where}: "${text}" is not an integer`);
      const value = Number(text);
      if (!Number.isSafeInteger(value)) throw new CliError(`${where}: ${text} is too large`);
      return { type: 'integer', value };
    }
    case 'floating_point': {
      const value = Number(text);
      if (text.trim() === '' || !Number.isFinite(value))
        throw new CliError(`${where}: "${text}" is not a number`);
      return { type: 'floating_point', value };
    }
    case 'boolean': {
      const t = text.trim().toLowerCase();
      if (t === 'true' || t === 'yes') return { type: 'boolean', value: true };
      if (t === 'false' || t === 'no') return { type: 'boolean', value: false };
      throw new CliError(`${where}: "${text}" must be true, false, yes or no`);
    }
    case 'text':
      return { type: 'text', value: text };
    case 'textarea':
      return { type: 'textarea', value: text };
    case 'enumeration': {
      const option =
        parameter.options.find((o) => o.name === text) ?? parameter.options.find((o) => o.value === text);
      if (!option) {
        const choices = parameter.options.map((o) =>
          o.name === o.value ? o.value : `${o.name} (${o.value})`,
        );
        throw new CliError(`${where}: "${text}" is not one of ${choices.join(', ')}`);
      }
      return { type: 'text', value: option.value };
    }
    case 'input_file':
    case 'input_directory':
      return fileValue(parameter, text, false, '--param');
    case 'peer': {
      const i = text.indexOf('=');
      if (i <= 0 || i === text.length - 1) throw new CliError(`${where}: "${text}" must be HOST=JOBID`);
      return { type: 'peer', hostname: text.slice(0, i), jobId: text.slice(i + 1) };
    }
    case 'license_server':
      return { type: 'license_server', id: text };
    case 'ingress':
      return { type: 'ingress', id: text };
    case 'network_ip':
      return { type: 'network', id: text };
    case 'workflow':
      return { type: 'workflow', specification: { job: text } };
  }
}

/** A Workflow's job script from a file on this machine (`--param NAME=@FILE`). */
async function localScript(name: string, path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    throw new CliError(`--param ${name}: cannot read the job script ${path}: ${(e as Error).message}`);
  }
}

function fileValue(
  parameter: ApplicationParameter,
  path: string,
  readOnly: boolean,
  flag: '--file' | '--param',
): AppParameterValue {
  if (!path.startsWith('/')) {
    throw new CliError(
      `${flag} ${parameter.name}: "${path}" must be a storage path such as /home/<user>/file or /projects/<id>/file`,
    );
  }
  return { type: 'file', path, ...(readOnly ? { readOnly } : {}) };
}

/** Finds APP[@VERSION]; without a version, the newest. Unknown names and versions are bad input. */
export async function findApplication(client: Client, ref: string): Promise<Application> {
  const at = ref.lastIndexOf('@');
  const name = at > 0 ? ref.slice(0, at) : ref;
  const version = at > 0 ? ref.slice(at + 1) : undefined;
  if (!name || version === '') throw new CliError(`application: "${ref}" must be APP or APP@VERSION`);
  try {
    return (await client.get<{ application: Application }>('/api/apps/retrieve', { name, version }))
      .application;
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    const apps = listOf<{ name: string; version: string }>(await client.get('/api/apps'));
    const versions = apps.filter((a) => a.name === name).map((a) => a.version);
    if (versions.length === 0) {
      throw new CliError(`application: there is no application ${name} (see \`ucompute apps\`)`);
    }
    throw new CliError(
      `application: ${name} has no version ${version} (its versions: ${versions.join(', ')})`,
    );
  }
}

function findProduct(products: Product[], id: string | undefined): Product {
  if (products.length === 0) throw new CliError('the service offers no products', 1);
  if (id === undefined) return products[0]!;
  const [category, productId] = id.includes('/') ? id.split('/', 2) : [undefined, id];
  const matches = products.filter(
    (p) => p.id === productId && (category === undefined || p.category === category),
  );
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) {
    throw new CliError(
      `--product: ${id} is in several categories; write CATEGORY/ID (${matches.map((p) => `${p.category}/${p.id}`).join(', ')})`,
    );
  }
  throw new CliError(
    `--product: there is no product ${id} (products: ${products.map((p) => p.id).join(', ')})`,
  );
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    {
      ...CLIENT_OPTIONS,
      param: { type: 'string', multiple: true },
      file: { type: 'string', multiple: true },
      mount: { type: 'string', multiple: true },
      product: { type: 'string' },
      replicas: { type: 'string' },
      time: { type: 'string' },
      name: { type: 'string' },
      wait: { type: 'boolean' },
      follow: { type: 'boolean' },
    },
    RUN_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${RUN_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) throw new CliError(`run takes one APP[@VERSION]\n\n${RUN_USAGE}`);

  // Local checks first, so that bad input fails before any request.
  let replicas: number | undefined;
  if (values.replicas !== undefined) {
    replicas = Number(values.replicas);
    if (!/^\d+$/.test(values.replicas) || !Number.isSafeInteger(replicas) || replicas < 1) {
      throw new CliError(`--replicas: "${values.replicas}" must be a whole number of at least 1`);
    }
  }
  const timeAllocation = values.time !== undefined ? parseDuration(values.time, '--time') : undefined;
  const params = (values.param ?? []).map((p) => splitAssignment(p, '--param'));
  const files = (values.file ?? []).map((f) => {
    const [name, rest] = splitAssignment(f, '--file');
    const readOnly = rest.endsWith(':ro');
    return { name, path: readOnly ? rest.slice(0, -3) : rest, readOnly };
  });

  const mounts = (values.mount ?? []).map((m): AppParameterValue => {
    const readOnly = m.endsWith(':ro');
    const path = readOnly ? m.slice(0, -3) : m;
    if (!path.startsWith('/')) {
      throw new CliError(
        `--mount ${m}: must be a storage path such as /home/<user>/data or /projects/<id>/data`,
      );
    }
    return { type: 'file', path, readOnly };
  });

  const client = await connect(values);
  const [app, products] = await Promise.all([
    findApplication(client, positionals[0]!),
    client.get<unknown>('/api/products').then((r) => listOf<Product>(r)),
  ]);
  const product = findProduct(products, values.product);

  const parameters: Record<string, AppParameterValue> = {};
  const given = (name: string, flag: string) => {
    if (Object.hasOwn(parameters, name)) throw new CliError(`${flag} ${name}: is given more than once`);
  };
  for (const [name, text] of params) {
    const parameter = parameterNamed(app, name, '--param');
    given(name, '--param');
    const script = parameter.type === 'workflow' && text.startsWith('@');
    parameters[name] = parameterValue(parameter, script ? await localScript(name, text.slice(1)) : text);
  }
  for (const f of files) {
    const parameter = parameterNamed(app, f.name, '--file');
    if (parameter.type !== 'input_file' && parameter.type !== 'input_directory') {
      throw new CliError(`--file ${f.name}: is a ${parameter.type} parameter; use --param`);
    }
    given(f.name, '--file');
    parameters[f.name] = fileValue(parameter, f.path, f.readOnly, '--file');
  }

  const specification: JobSpecification = {
    application: { name: app.metadata.name, version: app.metadata.version },
    product: { id: product.id, category: product.category },
    ...(values.name !== undefined ? { name: values.name } : {}),
    ...(replicas !== undefined ? { replicas } : {}),
    ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
    ...(mounts.length > 0 ? { resources: mounts } : {}),
    ...(timeAllocation !== undefined ? { timeAllocation } : {}),
  };
  const response = await client.post<{ responses: { id: string }[] }>(
    '/api/jobs',
    { items: [specification] },
    {
      // A fresh key per run: the service then never creates this job twice for one request.
      'idempotency-key': randomUUID(),
    },
  );
  const id = response.responses[0]?.id;
  if (!id) throw new CliError('the service accepted the job but returned no id', 1);
  const json = values.json === true;
  const streaming = values.wait || values.follow;
  if (json) printJson(response, streaming);
  else cliIo().stdout.write(`${id}\n`);
  if (!streaming) return 0;

  let job: Job;
  if (values.follow) job = await followJob(client, id, { json, follow: true });
  else job = await waitForJob(client, id);
  if (json && !values.follow) printJson(job, true);
  return finalOutcome(job, { json, toStderr: values.follow === true });
}
