/**
 * Plan throughput (issue 2): job specifications validated and planned per second on one thread, for
 * the example batch app (word-count, u1-standard-1) and the multi-node one (mpi-hello, 3 replicas),
 * with validation alone (`prepareJob`) beside them so that the cost split shows.
 *
 * The machine is small and noisy, so every round runs every case in turn, together with a reference
 * measured in the same round: a plain deep copy (`JSON.parse(JSON.stringify(job))`) of the planned
 * Volcano Job. Ratios to it are what to compare between runs and machines.
 *
 *   node bench/plan.bench.ts
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadCatalog } from '../src/catalog/catalog.ts';
import { loadProducts } from '../src/catalog/products.ts';
import { planJob } from '../src/jobs/plan.ts';
import { type JobEnvironment, prepareJob } from '../src/jobs/prepare.ts';
import { resolvePipelineConfig } from '../src/model/config.ts';

const ROUNDS = 5;
const ROUND_SECONDS = 1; // per case and round: N is sized from the warm-up rate
const WARMUP_SECONDS = 0.4;
const MAX_N = 2_000_000;
const TARGET_PLANS_PER_SECOND = 20_000;

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const env: JobEnvironment = {
  catalog: await loadCatalog(root('examples/apps')),
  products: await loadProducts(root('examples/products.yml')),
  // The example catalogue's mpi-hello runs as root, which this operator allows.
  config: resolvePipelineConfig({ security: { allowRootApps: true } }),
};
// The example specifications as shipped: their files are in /home/local, the CLI's default user.
const spec = (name: string): unknown => JSON.parse(readFileSync(root(`examples/jobs/${name}.json`), 'utf8'));
const wordCount = spec('word-count');
const mpiHello = spec('mpi-hello');
const identity = { id: 'bench1', owner: { createdBy: 'local' }, createdAt: 1_700_000_000_000 };

const planned = await planJob(wordCount, identity, env);
const volcanoJob = planned[0]!;

interface Case {
  name: string;
  /** Returns a promise only for async work, so that sync cases are not charged for an await. */
  run: () => unknown;
  async: boolean;
  reference?: boolean;
}

const CASES: Case[] = [
  { name: 'plan word-count (u1-standard-1)', run: () => planJob(wordCount, identity, env), async: true },
  {
    name: 'prepareJob word-count (validation only)',
    run: () => prepareJob(wordCount, identity, env),
    async: false,
  },
  { name: 'plan mpi-hello (3 replicas)', run: () => planJob(mpiHello, identity, env), async: true },
  {
    name: 'prepareJob mpi-hello (validation only)',
    run: () => prepareJob(mpiHello, identity, env),
    async: false,
  },
  {
    name: 'reference: deep copy of the planned Job',
    run: () => JSON.parse(JSON.stringify(volcanoJob)),
    async: false,
    reference: true,
  },
];

let sink: unknown; // keeps results alive so that no call is optimised away

/** Runs `n` calls; each latency is the time between consecutive stamps, so they add up to the total. */
async function timed(c: Case, n: number, latencies: Float64Array, offset: number): Promise<number> {
  const start = process.hrtime.bigint();
  let last = start;
  for (let i = 0; i < n; i++) {
    sink = c.async ? await c.run() : c.run();
    const now = process.hrtime.bigint();
    latencies[offset + i] = Number(now - last);
    last = now;
  }
  return Number(last - start) / 1e9;
}

/** Runs for about `seconds` and returns the rate, to size the timed rounds. */
async function warmUp(c: Case, seconds: number): Promise<number> {
  let calls = 0;
  const start = performance.now();
  while (performance.now() - start < seconds * 1000) {
    for (let i = 0; i < 100; i++) sink = c.async ? await c.run() : c.run();
    calls += 100;
  }
  return calls / ((performance.now() - start) / 1000);
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const quantile = (sorted: Float64Array, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

const began = performance.now();
const sizes = new Map<Case, number>();
for (const c of CASES) {
  const rate = await warmUp(c, WARMUP_SECONDS);
  sizes.set(c, Math.max(100, Math.min(MAX_N, Math.round(rate * ROUND_SECONDS))));
}

const latencies = new Map(CASES.map((c) => [c, new Float64Array(sizes.get(c)! * ROUNDS)]));
const rates = new Map<Case, number[]>(CASES.map((c) => [c, []]));
// Round-robin: a slow patch of the machine hits every case of that round, and so cancels in ratios.
for (let round = 0; round < ROUNDS; round++) {
  for (const c of CASES) {
    const n = sizes.get(c)!;
    const seconds = await timed(c, n, latencies.get(c)!, round * n);
    rates.get(c)!.push(n / seconds);
  }
}
if (sink === undefined) throw new Error('no result');

const reference = CASES.find((c) => c.reference)!;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const micro = (ns: number) => (ns / 1000).toFixed(1);

const rows = CASES.map((c) => {
  const perRound = rates.get(c)!;
  const sorted = latencies.get(c)!.sort();
  // The ratio is taken round by round, against the reference of the same round.
  const ratio = median(perRound.map((r, i) => r / rates.get(reference)![i]!));
  return {
    c,
    median: median(perRound),
    cells: [
      c.name,
      fmt(sizes.get(c)!),
      perRound.map(fmt).join(' / '),
      fmt(median(perRound)),
      micro(quantile(sorted, 0.5)),
      micro(quantile(sorted, 0.99)),
      c.reference ? '1' : ratio.toFixed(3),
    ],
  };
});

const header = [
  'case',
  'N per round',
  'ops/s per round',
  'median ops/s',
  'p50 µs',
  'p99 µs',
  'ratio to reference',
];
const lines = [
  `| ${header.join(' | ')} |`,
  `|${header.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`,
  ...rows.map((r) => `| ${r.cells.join(' | ')} |`),
];

const cpu = os.cpus()[0]?.model.trim() ?? 'unknown CPU';
const plan = rows[0]!.median;
const prepare = rows[1]!.median;
process.stdout.write(
  [
    `Node ${process.version}, ${cpu}, ${os.availableParallelism()} cores (one JS thread used), ` +
      `${ROUNDS} rounds of ~${ROUND_SECONDS} s per case after ${WARMUP_SECONDS} s warm-up`,
    '',
    ...lines,
    '',
    `validation is ${((100 * plan) / prepare).toFixed(0)}% of a word-count plan ` +
      `(${micro(1e9 / prepare)} of ${micro(1e9 / plan)} µs)`,
    `target >= ${fmt(TARGET_PLANS_PER_SECOND)} plans/s for word-count: ` +
      `${plan >= TARGET_PLANS_PER_SECOND ? 'met' : 'NOT met'} (median ${fmt(plan)})`,
    `took ${((performance.now() - began) / 1000).toFixed(1)} s`,
    '',
  ].join('\n'),
);
