import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { getJson } from '../api.ts';
import { credits, number } from '../format.ts';
import type { UsageItem, Wallet } from '../types.ts';
import { seriesOf } from '../usage-series.ts';

const COLOURS = ['#1d5fa8', '#b3541e', '#2e7d32', '#7b1fa2', '#a11d3a', '#00838f'];

/** Allocations with what is left, and a chart of credits used per day per product category. */
export function UsagePage() {
  const [wallets, setWallets] = useState<Wallet[] | null>(null);
  const [usage, setUsage] = useState<{ from: number; to: number; items: UsageItem[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const chart = useRef<HTMLDivElement>(null);

  useEffect(() => {
    Promise.all([
      getJson<{ items: Wallet[] }>('/api/accounting/wallets'),
      getJson<{ from: number; to: number; items: UsageItem[] }>('/api/accounting/usage', { bucket: 'day' }),
    ])
      .then(([w, u]) => {
        setWallets(w.items);
        setUsage(u);
      })
      .catch((e: Error) => setError(e.message));
  }, []);

  useEffect(() => {
    const host = chart.current;
    if (!usage || !wallets || !host) return;
    const known = [...new Set(wallets.map((w) => w.category))];
    const { days, byCategory } = seriesOf(usage.items, known, usage.from, usage.to);
    const categories = [...byCategory.keys()].sort();
    const plot = new uPlot(
      {
        width: Math.min(host.clientWidth || 800, 960),
        height: 280,
        series: [
          {},
          ...categories.map((c, i) => ({
            label: c,
            stroke: COLOURS[i % COLOURS.length],
            fill: `${COLOURS[i % COLOURS.length]}22`,
            value: (_u: uPlot, v: number | null) => (v === null ? '' : number(v)),
          })),
        ],
        axes: [{}, { label: 'credits', size: 70 }],
        // From zero, and a visible axis when nothing was used yet.
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      },
      [days.map((d) => d / 1000), ...categories.map((c) => byCategory.get(c)!)],
      host,
    );
    const resize = () => plot.setSize({ width: Math.min(host.clientWidth, 960), height: 280 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [usage, wallets]);

  const total = (usage?.items ?? []).reduce((sum, i) => sum + i.credits, 0);
  return (
    <section>
      <h1>Usage</h1>
      {error !== null && <p class="error">{error}</p>}
      <h2>Allocations</h2>
      {wallets !== null && wallets.length === 0 && <p>No allocations yet.</p>}
      {wallets !== null && wallets.length > 0 && (
        <table class="wallets" aria-label="Allocations">
          <thead>
            <tr>
              <th scope="col">Owner</th>
              <th scope="col">Category</th>
              <th scope="col">Allocated</th>
              <th scope="col">Used</th>
              <th scope="col">Left</th>
            </tr>
          </thead>
          <tbody>
            {wallets.map((w) => (
              <tr key={`${w.owner}/${w.category}`}>
                <td>{w.owner}</td>
                <td>{w.category}</td>
                <td>{number(w.allocated)}</td>
                <td>{number(w.used)}</td>
                <td>
                  <meter
                    min={0}
                    max={w.allocated || 1}
                    value={w.balance}
                    aria-label={`Left in ${w.category}`}
                  />{' '}
                  {number(w.balance)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Credits used per day</h2>
      {usage !== null && (
        <p class="muted" data-testid="usage-total">
          {credits(total)} in the last 30 days
        </p>
      )}
      <div ref={chart} class="chart" role="img" aria-label="Credits used per day per product category" />
    </section>
  );
}
