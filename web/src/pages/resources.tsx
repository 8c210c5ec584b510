import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { getJson } from '../api.ts';
import { formatBytes } from '../format.ts';

// The job page's live resource views: CPU and memory of each rank, sampled by the service, drawn
// with uPlot (loaded with this page only) and read again as new samples come.

interface Sample {
  at: number;
  cpuCores?: number;
  memoryBytes?: number;
  gpuUtilization?: number;
}

interface Resources {
  periodMs: number;
  limits: { cpuCores: number; memoryBytes: number; gpus: number };
  ranks: { rank: number; samples: Sample[] }[];
}

const COLOURS = ['#1d5fa8', '#b3541e', '#2e7d32', '#7b1fa2', '#a11d3a', '#00838f'];
const HEIGHT = 200;

/** Every rank's value of `field` at each time any rank was sampled (null where it was not). */
function aligned(ranks: Resources['ranks'], field: 'cpuCores' | 'memoryBytes'): uPlot.AlignedData {
  const times = [...new Set(ranks.flatMap((r) => r.samples.map((s) => s.at)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const series = ranks.map((r) => {
    const values: (number | null)[] = times.map(() => null);
    for (const s of r.samples) values[index.get(s.at)!] = s[field] ?? null;
    return values;
  });
  return [times.map((t) => t / 1000), ...series];
}

function Chart(props: {
  data: uPlot.AlignedData;
  ranks: number[];
  max: number;
  unit: string;
  format: (v: number) => string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${props.ranks.join(',')}/${props.max}`;
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    plot.current = new uPlot(
      {
        width: Math.min(el.clientWidth || 600, 960),
        height: HEIGHT,
        series: [
          {},
          ...props.ranks.map((rank, i) => ({
            label: `rank ${rank}`,
            stroke: COLOURS[i % COLOURS.length],
            value: (_u: uPlot, v: number | null) => (v === null ? '' : props.format(v)),
          })),
        ],
        axes: [{}, { label: props.unit, size: 90, values: (_u, ticks) => ticks.map(props.format) }],
        scales: { x: { time: true }, y: { range: () => [0, props.max] } },
      },
      props.data,
      el,
    );
    const resize = () => plot.current?.setSize({ width: Math.min(el.clientWidth, 960), height: HEIGHT });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => plot.current?.setData(props.data), [props.data]);
  return (
    <div ref={host} class="chart small" role="img" aria-label={`${props.unit} of each rank over time`} />
  );
}

/** CPU and memory of each rank of a running job, live; a table of the latest values beside. */
export function ResourceCharts({ jobId }: { jobId: string }) {
  const [resources, setResources] = useState<Resources | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let known: Resources | null = null;
    const read = async () => {
      try {
        const last = Math.max(0, ...(known?.ranks.flatMap((r) => r.samples.map((s) => s.at)) ?? []));
        const fresh = await getJson<Resources>('/api/jobs/resources', {
          id: jobId,
          after: last || undefined,
        });
        if (stopped) return;
        const ranks = new Map((known?.ranks ?? []).map((r) => [r.rank, [...r.samples]]));
        for (const r of fresh.ranks) ranks.set(r.rank, [...(ranks.get(r.rank) ?? []), ...r.samples]);
        known = {
          ...fresh,
          ranks: [...ranks].sort(([a], [b]) => a - b).map(([rank, samples]) => ({ rank, samples })),
        };
        setResources(known);
        setError(null);
      } catch (e) {
        setError((e as Error).message);
      }
      if (!stopped) timer = setTimeout(() => void read(), known?.periodMs ?? 5000);
    };
    void read();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [jobId]);

  if (error !== null && resources === null) return <p class="error">{error}</p>;
  if (resources === null) return <p class="loading">Loading…</p>;
  if (resources.ranks.length === 0)
    return (
      <p class="muted">No samples yet: they come every {resources.periodMs / 1000} s while the job runs.</p>
    );
  const ranks = resources.ranks.map((r) => r.rank);
  const { limits } = resources;
  const cores = (v: number) => v.toFixed(v < 10 ? 2 : 0);
  const latest = resources.ranks.map((r) => ({ rank: r.rank, last: r.samples.at(-1) }));
  return (
    <div
      class="resources"
      data-testid="resources"
      data-samples={resources.ranks.reduce((n, r) => n + r.samples.length, 0)}
    >
      <Chart
        data={aligned(resources.ranks, 'cpuCores')}
        ranks={ranks}
        max={Math.max(limits.cpuCores, 0.1)}
        unit="CPU (cores)"
        format={cores}
      />
      <Chart
        data={aligned(resources.ranks, 'memoryBytes')}
        ranks={ranks}
        max={Math.max(limits.memoryBytes, 1)}
        unit="memory"
        format={(v) => formatBytes(v)}
      />
      <table class="latest" aria-label="Latest use per rank">
        <thead>
          <tr>
            <th scope="col">Rank</th>
            <th scope="col">CPU</th>
            <th scope="col">Memory</th>
            {limits.gpus > 0 && <th scope="col">GPU</th>}
          </tr>
        </thead>
        <tbody>
          {latest.map(({ rank, last }) => (
            <tr key={rank}>
              <td>{rank}</td>
              <td data-testid={`cpu-${rank}`}>
                {last?.cpuCores !== undefined ? `${cores(last.cpuCores)} of ${limits.cpuCores} cores` : '–'}
              </td>
              <td>
                {last?.memoryBytes !== undefined
                  ? `${formatBytes(last.memoryBytes)} of ${formatBytes(limits.memoryBytes)}`
                  : '–'}
              </td>
              {limits.gpus > 0 && (
                <td>
                  {last?.gpuUtilization !== undefined ? `${Math.round(last.gpuUtilization * 100)}%` : '–'}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
