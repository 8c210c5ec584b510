import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { run } from '../backends/local/exec.ts';
import { removeBridgeNetwork } from '../backends/local/network.ts';
import { openLocalBackend } from '../backends/local/open.ts';
import type { LocalSettings } from '../backends/local/settings.ts';
import type { BackendEvent } from '../jobs/backend.ts';
import { resolvePipelineConfig } from '../model/config.ts';
import { readManifest } from '../volcano/emulation/manifest.ts';
import { parseCommandLine } from './args.ts';
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
  --data-dir DIR      where storage is (default as for serve)

The run keeps its own state in a temporary folder and its pods on a bridge and subnet of their
own, all removed when it exits (also on SIGINT or SIGTERM, which first end the job's pods): a
ucompute server or another run on the same machine is never touched.`;

export async function vcjobCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    {
      follow: { type: 'boolean', short: 'f' },
      config: { type: 'string' },
      'data-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    VCJOB_USAGE,
  );
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
  const id = `${job.metadata.name}-${randomBytes(3).toString('hex')}`;
  const say = (text: string) =>
    process.stderr.write(`${new Date().toISOString()} ${job.metadata.name}: ${text}\n`);

  // A signal ends the job (its pods are stopped) and then this process, never the other way round.
  let interrupted = false;
  let cancelJob: (() => void) | null = null;
  const interrupt = () => {
    interrupted = true;
    cancelJob?.();
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  // Its own state folder, bridge and subnet: a server or another run on this machine is never touched.
  const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-vcjob-state-'));
  const network = await privateNetwork(config.local?.network);
  try {
    const backend = await openLocalBackend({
      config: { ...config.local, stateDir, network },
      dataDir,
      storageRoot: config.storage?.root ?? join(dataDir, 'storage'),
      storageClaim: resolvePipelineConfig(config).kubernetes.storageClaim,
      embedded: values.config === undefined,
    });
    try {
      for (const w of backend.warnings) process.stderr.write(`warning: ${w}\n`);
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
      if (interrupted) return 1;
      await backend.submitVolcanoJob(id, job, companions);
      cancelJob = () => void backend.cancel(id).catch(() => undefined);
      if (interrupted) cancelJob();
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
      // Ends the job's pods if something above failed; nothing of this run outlives it.
      await backend.cancel(id).catch(() => undefined);
      await backend.close();
    }
  } finally {
    if (network.bridge && process.getuid?.() === 0) await removeBridgeNetwork(network.bridge);
    await rm(stateDir, { recursive: true, force: true });
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
  }
}

/**
 * A bridge and a /24 of 10.90.0.0/16 no interface of the machine uses, for one run; the rest of
 * the configured network (egress, pool) applies.
 */
async function privateNetwork(
  configured: LocalSettings['network'],
): Promise<NonNullable<LocalSettings['network']>> {
  const used = process.getuid?.() === 0 ? await run('ip', ['-o', '-4', 'addr', 'show']).catch(() => '') : '';
  const free = Array.from({ length: 256 }, (_, i) => i).filter((i) => !used.includes(` 10.90.${i}.`));
  const third = free[Math.floor(Math.random() * free.length)];
  if (third === undefined) throw new CliError('no free 10.90.x.0/24 subnet left for the run');
  return {
    ...configured,
    bridge: `ucv${randomBytes(3).toString('hex')}`,
    subnet: `10.90.${third}.0/24`,
    poolSize: configured?.poolSize ?? 0,
  };
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
