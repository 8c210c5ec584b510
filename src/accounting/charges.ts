import { periodMillis, type UnitOfPrice } from '../model/product.ts';

/** What a job is charged by: copied from the product when the job was made. */
export interface ChargeBasis {
  units: number;
  pricePerUnit: number;
  unitOfPrice: UnitOfPrice;
}

/**
 * Periods owed for a job that has run from `startedAt` to `now`. While it runs only whole periods
 * are due; at the end the started period counts too (a 61-second job pays for two minutes).
 * A job that never ran owes nothing.
 */
export function periodsDue(
  startedAt: number | null,
  now: number,
  unitOfPrice: UnitOfPrice,
  alreadyCharged: number,
  final: boolean,
): number {
  if (startedAt === null || now <= startedAt) return 0;
  const elapsed = (now - startedAt) / periodMillis(unitOfPrice);
  const owed = final ? Math.ceil(elapsed) : Math.floor(elapsed);
  return Math.max(0, owed - alreadyCharged);
}

export function credits(basis: ChargeBasis, periods: number): number {
  return basis.units * basis.pricePerUnit * periods;
}
