import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { openLocalBackend } from '../backends/local/open.ts';
import type { BackendEvent } from '../jobs/backend.ts';
import { resolvePipelineConfig } from '../model/config.ts';
import { readManifest } from '../volcano/manifest.ts';
import { loadConfig } from './config-file.ts';
import { defaultDataDir } from './defaults.ts';
import { CliError } from './errors.ts';

export const VCJOB_USAGE = `Usage: ucompute vcjob run FILE.yaml [options]

Runs a Volcano Job manifest (batch.volcano.sh/v1alpha1, with any ConfigMaps and Secrets it
mounts) on this machine with the local backend, as Volcano would on a cluster: tasks and
replicas, the env, svc, ssh and mpi plugins, gang start, policies, retries. Prints the job's
phase changes and its output; exits 0 when the job Completed, 1 otherwise.

Options:
  --follow            stream the output as it comes (otherwise it is printed at the end)
  --config FILE       ucompute configuration (its "local" section applies)
  --data-dir DIR      where job state and logs are kept (default as for serve)`;

export async function vcjobCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      follow: { type: 'boolean', short: 'f' },
      config: { type: 'string' },
      'data-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${VCJOB_USAGE}\n`);
    return 0;
  }
  const [verb, file, ...extra] = positionals;
  if (verb !== 'run' || file === undefined || extra.length > 0)
    throw new CliError(`expected "vcjob run FILE.yaml"\n\n${VCJOB_USAGE}`);
  const documents = parseAllDocuments(await readFile(file, 'utf8'));
  const broken = documents.find((d) => d.errors.length > 0);
  if (broken) throw new CliError(`${file}: ${broken.errors[0]!.message}`);
  const config = await loadConfig(values.config);
  const { job, companions } = readManifest(
    documents.map((d) => d.toJS()),
    file,
    resolvePipelineConfig(config).security,
  );

  const dataDir = resolve(values['data-dir'] ?? config.dataDir ?? defaultDataDir());
  const backend = await openLocalBackend({
    config: config.local ?? {},
    dataDir,
    storageRoot: config.storage?.root ?? join(dataDir, 'storage'),
    storageClaim: resolvePipelineConfig(config).kubernetes.storageClaim,
    embedded: values.config === undefined,
  });
  for (const w of backend.warnings) process.stderr.write(`warning: ${w}\n`);

  const id = `${job.metadata.name}-${randomBytes(3).toString('hex')}`;
  const say = (text: string) =>
    process.stderr.write(`${new Date().toISOString()} ${job.metadata.name}: ${text}\n`);
  backend.onPhase((jobId, phase) => {
    if (jobId === id) say(`phase ${phase}`);
  });
  const ended = new Promise<BackendEvent>((done) => {
    backend.onEvent((e) => {
      if (e.jobId !== id) return;
      if (e.state === 'IN_QUEUE') say(e.status);
      if (e.state === 'SUCCESS' || e.state === 'FAILURE') done(e);
    });
  });
  const interrupt = () => void backend.cancel(id);
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);

  try {
    await backend.submitVolcanoJob(id, job, companions);
    const [stdout, stderr] = [linePrefixer(), linePrefixer()];
    const print = async (follow: boolean) => {
      for await (const chunk of backend.logs(id, { follow })) {
        if (chunk.stdout) process.stdout.write(stdout(chunk.rank, chunk.stdout));
        if (chunk.stderr) process.stderr.write(stderr(chunk.rank, chunk.stderr));
      }
    };
    if (values.follow) await print(true);
    const end = await ended;
    if (!values.follow) await print(false);
    say(end.status);
    return backend.phaseOf(id) === 'Completed' ? 0 : 1;
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
    await backend.close();
  }
}

/** Marks each line of a rank's output (one stream) with the rank, also when a line arrives in pieces. */
function linePrefixer(): (rank: number, text: string) => string {
  const midLine = new Set<string>();
  let previous = '';
  return (rank, text) => {
    let out = '';
    for (const piece of text.split(/(?<=\n)/)) {
      const key = String(rank);
      // Another rank's unfinished line ends here, so that lines never run together.
      if (previous !== key && midLine.delete(previous)) out += '\n';
      previous = key;
      if (!midLine.has(key)) out += `[${rank}] `;
      out += piece;
      if (piece.endsWith('\n')) midLine.delete(key);
      else midLine.add(key);
    }
    return out;
  };
}
