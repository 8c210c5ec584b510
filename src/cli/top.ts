import { formatBytes } from '../model/bytes.ts';
import { clientFlags, parseClientCommand } from './args.ts';
import { CLIENT_OPTIONS_USAGE, type Client, connect } from './client.ts';
import { CliError } from './errors.ts';
import { formatTime, printJson, table } from './format.ts';
import { cliIo } from './io.ts';
import { resolveJobId } from './job-ids.ts';

export const TOP_USAGE = `Usage: ucompute top ID [--once] [options]

What each rank of a running job uses, as the service samples it (every few seconds): CPU in cores
and as a share of the machine type's, memory and its share, GPU where one is seen, and the CPU of
the last minutes as a small chart. Redrawn at each new sample until Ctrl-C or the job ends.

Options:
  --once              print the latest samples once and end

${CLIENT_OPTIONS_USAGE}`;

interface Sample {
  at: number;
  cpuCores?: number;
  memoryBytes?: number;
  gpuUtilization?: number;
  gpuMemoryBytes?: number;
}

interface Resources {
  jobId: string;
  periodMs: number;
  limits: { cpuCores: number; memoryBytes: number; gpus: number };
  ranks: { rank: number; samples: Sample[] }[];
}

const BARS = '▁▂▃▄▅▆▇█';
/** The chart's width: the last this many samples. */
const CHART = 24;
/** A top ends by itself after a day, so that a forgotten terminal does not watch forever. */
const MAX_MS = 24 * 3600 * 1000;

const percent = (part: number, whole: number) => (whole > 0 ? ` (${Math.round((100 * part) / whole)}%)` : '');

/** The CPU of the last samples as bars scaled to the machine type's cores. */
export function cpuChart(samples: readonly Sample[], cores: number): string {
  return samples
    .slice(-CHART)
    .map((s) => {
      if (s.cpuCores === undefined || cores <= 0) return ' ';
      return BARS[Math.min(BARS.length - 1, Math.floor((s.cpuCores / cores) * BARS.length))];
    })
    .join('');
}

/** One table: a row per rank from its newest sample. */
export function topTable(r: Resources): string {
  const rows = r.ranks.map(({ rank, samples }) => {
    const last = samples.at(-1);
    const cpu = last?.cpuCores;
    const memory = last?.memoryBytes;
    return [
      String(rank),
      cpu === undefined ? '-' : `${cpu.toFixed(2)}${percent(cpu, r.limits.cpuCores)}`,
      memory === undefined ? '-' : `${formatBytes(memory)}${percent(memory, r.limits.memoryBytes)}`,
      last?.gpuUtilization === undefined ? '-' : `${Math.round(last.gpuUtilization * 100)}%`,
      cpuChart(samples, r.limits.cpuCores),
    ];
  });
  const head = `job ${r.jobId}: each rank may use ${r.limits.cpuCores} cores and ${formatBytes(r.limits.memoryBytes)}${r.limits.gpus > 0 ? ` and ${r.limits.gpus} GPUs` : ''}`;
  return `${head}\n${table(['RANK', 'CPU (CORES)', 'MEMORY', 'GPU', 'CPU, LAST SAMPLES'], rows)}`;
}

export async function topCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, TOP_USAGE, { once: { type: 'boolean' } });
  if (help) return 0;
  if (positionals.length !== 1) throw new CliError(`expected one job ID\n\n${TOP_USAGE}`);
  const client = await connect(clientFlags(values));
  const id = await resolveJobId(client, positionals[0]!);
  const read = () => client.get<Resources>('/api/jobs/resources', { id });
  if (values.once === true) {
    const resources = await read();
    if (values.json === true) printJson(resources);
    else
      cliIo().stdout.write(
        resources.ranks.length === 0
          ? `job ${id}: no samples yet (it runs, or ran, without any)\n`
          : topTable(resources),
      );
    return 0;
  }
  return watch(client, id, read, values.json === true);
}

async function watch(
  client: Client,
  id: string,
  read: () => Promise<Resources>,
  json: boolean,
): Promise<number> {
  const interrupted = new AbortController();
  const stop = () => interrupted.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const clear = cliIo().stdout.isTTY ? '\x1b[H\x1b[2J' : '';
  const deadline = Date.now() + MAX_MS;
  try {
    while (Date.now() < deadline && !interrupted.signal.aborted) {
      const [resources, job] = await Promise.all([
        read(),
        client.get<{ status: { state: string } }>('/api/jobs/retrieve', { id }),
      ]);
      if (json) cliIo().stdout.write(`${JSON.stringify(resources)}\n`);
      else
        cliIo().stdout.write(
          `${clear}${formatTime(Date.now())}  ${job.status.state}\n${resources.ranks.length > 0 ? topTable(resources) : 'no samples yet\n'}`,
        );
      if (!['IN_QUEUE', 'RUNNING'].includes(job.status.state)) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, resources.periodMs);
        function done() {
          clearTimeout(timer);
          interrupted.signal.removeEventListener('abort', done);
          resolve();
        }
        interrupted.signal.addEventListener('abort', done);
      });
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return 0;
}
