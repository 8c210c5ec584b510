/**
 * The units of a product's price, as plain data, and how long each lasts: the schema in product.ts
 * is built from them, and the CLI's `balance` reads them without the schemas (typebox).
 */
export const UNITS_OF_PRICE = ['CREDITS_PER_MINUTE', 'CREDITS_PER_HOUR', 'CREDITS_PER_DAY'] as const;
export type UnitOfPrice = (typeof UNITS_OF_PRICE)[number];

/** How long a unit of price lasts, in milliseconds. */
export function periodMillis(unit: UnitOfPrice = 'CREDITS_PER_MINUTE'): number {
  if (unit === 'CREDITS_PER_DAY') return 86_400_000;
  if (unit === 'CREDITS_PER_HOUR') return 3_600_000;
  return 60_000;
}
