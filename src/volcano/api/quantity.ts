import type { Quantity } from './types.ts';

/**
 * Kubernetes resource quantities ("500m", "2", "4Gi", "1e3", "1.5G", or a plain number: the API
 * takes int-or-string, so `cpu: 1` and `memory: 1024` are quantities too) as numbers.
 */

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The quantity's value; throws naming the text when it is not a quantity. */
export function parseQuantity(quantity: Quantity): number {
  if (typeof quantity === 'number') {
    if (!Number.isFinite(quantity)) throw new Error(`${quantity} is not a Kubernetes quantity`);
    return quantity;
  }
  const text = quantity;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(
    text.trim(),
  );
  if (!m) throw new Error(`"${text}" is not a Kubernetes quantity (such as 500m, 2, 4Gi)`);
  const base = Number(m[1]);
  return m[2] !== undefined ? base * 10 ** Number(m[2].slice(1)) : base * (SUFFIXES[m[3] ?? ''] ?? 1);
}

/** CPU in millicores, rounded up as the kubelet does. */
export const cpuMillis = (quantity: Quantity): number => Math.ceil(parseQuantity(quantity) * 1000 - 1e-9);

export const bytes = (quantity: Quantity): number => Math.ceil(parseQuantity(quantity));
