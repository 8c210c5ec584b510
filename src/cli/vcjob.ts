import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { removeBridgeNetwork } from '../backends/local/network.ts';
import { openLocalBackend } from '../backends/local/open.ts';
import type { BackendEvent } from '../jobs/backend.ts';
import { resolvePipelineConfig } from '../model/config.ts';
import { readManifest } from '../volcano/emulation/manifest.ts';
import { parseCommandLine } from './args.ts';
import { loadConfig } from './config-file.ts';
import { defaultDataDir } from './defaults.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const VCJOB_USAGE = `Usage: ucompute vcjob run FILE.yaml [options]

Runs the Volcano Jobs of a manifest (batch.volcano.sh/v1alpha1, with any ConfigMaps and Secrets
they mount) on this machine with the local backend, as Volcano would on a cluster: tasks and
replicas, the env, svc, ssh and mpi plugins, gang start, policies, retries. Prints each job's
phase changes and output (lines marked [rank], or [job/rank] for several jobs); exits 0 when
every job Completed, 1 otherwise.

Options:
  --follow            stream the output as it comes (otherwise it is printed at the end)
  --config FILE       ucompute configuration (its "local" section applies)
  --data-dir DIR      where storage is (default as for serve)

The run keeps its own state in a temporary folder and its pods on a bridge and subnet of their
own, all removed when it exits (also on SIGINT or SIGTERM, which first end the jobs' pods): a
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
    cliIo().stdout.write(`${VCJOB_USAGE}\n`);
    return 0;
  }
  const [verb, file, ...extra] = positionals;
  if (verb !== 'run' || file === undefined || extra.length > 0)
    throw new CliError(`expected "vcjob run FILE.yaml"\n\n${VCJOB_USAGE}`);
  const documents = parseAllDocuments(await readFile(file, 'utf8'));
  const broken = documents.find((d) => d.errors.length > 0);
  if (broken) throw new CliError(`${file}: ${broken.errors[0]!.message}`);
  const config = await loadConfig(values.config);
  const { jobs, companions } = readManifest(
    documents.map((d) => d.toJS()),
    file,
    resolvePipelineConfig(config).security,
  );

  const dataDir = resolve(values['data-dir'] ?? config.dataDir ?? defaultDataDir());
  const ids = jobs.map((job) => `${job.metadata.name}-${randomBytes(3).toString('hex')}`);
  const nameOf = (i: number) => jobs[i]!.metadata.name;
  const say = (i: number, text: string) =>
    cliIo().stderr.write(`${new Date().toISOString()} ${nameOf(i)}: ${text}\n`);

  // A signal ends the jobs (their pods are stopped) and then this process, never the other way round.
  let interrupted = false;
  let cancelJobs: (() => void) | null = null;
  const interrupt = () => {
    interrupted = true;
    cancelJobs?.();
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  // Its own state folder: its bridge, subnet and cgroup folder are derived from it (see
  // host-names.ts) whatever the configuration names (a server's), so that a server or another run
  // on this machine is never touched.
  const stateDir = await mkdtemp(join(tmpdir(), 'ucompute-vcjob-state-'));
  const { bridge: _bridge, subnet: _subnet, ...network } = config.local?.network ?? {};
  const { cgroupParent: _cgroupParent, ...local } = config.local ?? {};
  let bridge: string | null = null;
  try {
    const backend = await openLocalBackend({
      config: { ...local, stateDir, network: { ...network, poolSize: 0 } },
      dataDir,
      storageRoot: config.storage?.root ?? join(dataDir, 'storage'),
      storageClaim: resolvePipelineConfig(config).kubernetes.storageClaim,
      embedded: values.config === undefined,
    });
    // Made for this run only.
    bridge = backend.hostNames?.bridge ?? null;
    try {
      for (const w of backend.warnings) cliIo().stderr.write(`warning: ${w}\n`);
      backend.onPhase((jobId, phase) => {
        if (ids.includes(jobId)) say(ids.indexOf(jobId), `phase ${phase}`);
      });
      const ended = ids.map(
        (id, i) =>
          new Promise<BackendEvent>((done) => {
            backend.onEvent((e) => {
              if (e.jobId !== id) return;
              if (e.state === 'IN_QUEUE') say(i, e.status);
              if (e.state === 'SUCCESS' || e.state === 'FAILURE') done(e);
            });
          }),
      );
      if (interrupted) return 1;
      for (const [i, id] of ids.entries()) await backend.submitVolcanoJob(id, jobs[i]!, companions);
      cancelJobs = () => {
        for (const id of ids) void backend.cancel(id).catch(() => undefined);
      };
      if (interrupted) cancelJobs();
      // One job's lines carry its ranks, several jobs' their names too.
      const label = (i: number) => (ids.length > 1 ? `${nameOf(i)}/` : '');
      const print = async (i: number, follow: boolean) => {
        const [stdout, stderr] = [linePrefixer(label(i)), linePrefixer(label(i))];
        for await (const chunk of backend.logs(ids[i]!, { follow })) {
          if (chunk.stdout) cliIo().stdout.write(stdout(chunk.rank, chunk.stdout));
          if (chunk.stderr) cliIo().stderr.write(stderr(chunk.rank, chunk.stderr));
        }
      };
      if (values.follow) await Promise.all(ids.map((_, i) => print(i, true)));
      const ends = await Promise.all(ended);
      for (const [i, end] of ends.entries()) {
        if (!values.follow) await print(i, false);
        say(i, end.status);
      }
      return ids.every((id) => backend.phaseOf(id) === 'Completed') ? 0 : 1;
    } finally {
      // Ends the jobs' pods if something above failed; nothing of this run outlives it.
      for (const id of ids) await backend.cancel(id).catch(() => undefined);
      await backend.close();
    }
  } finally {
    if (bridge !== null) await removeBridgeNetwork(bridge);
    await rm(stateDir, { recursive: true, force: true });
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
  }
}

/**
 * Marks each line of a rank's output (one stream) with the rank after `label`, also when a line
 * arrives in pieces.
 */
function linePrefixer(label: string): (rank: number, text: string) => string {
  const midLine = new Set<string>();
  let previous = '';
  return (rank, text) => {
    let out = '';
    for (const piece of text.split(/(?<=\n)/)) {
      const key = String(rank);
      // Another rank's unfinished line ends here, so that lines never run together.
      if (previous !== key && midLine.delete(previous)) out += '\n';
      previous = key;
      if (!midLine.has(key)) out += `[${label}${rank}] `;
      out += piece;
      if (piece.endsWith('\n')) midLine.delete(key);
      else midLine.add(key);
    }
    return out;
  };
}
