import { periodMillis, type UnitOfPrice } from '../model/product.ts';

/** What a job is charged by: copied from the product when the job was made. */
export interface ChargeBasis {
  units: number;
  pricePerUnit: number;
  unitOfPrice: UnitOfPrice;
}

/**
 * Periods owed for a job that has run `timeRunMs` in all, of which `alreadyCharged` were charged.
 * While it runs only whole periods are due; when a run ends (or is suspended) the started period
 * counts too (a 61-second job pays for two minutes). A job that never ran owes nothing.
 */
export function periodsDue(
  timeRunMs: number,
  unitOfPrice: UnitOfPrice,
  alreadyCharged: number,
  final: boolean,
): number {
  if (timeRunMs <= 0) return 0;
  const elapsed = timeRunMs / periodMillis(unitOfPrice);
  const owed = final ? Math.ceil(elapsed) : Math.floor(elapsed);
  return Math.max(0, owed - alreadyCharged);
}

/** How long a job has run up to `now`: its earlier runs and the current one; suspended time is not. */
export function timeRun(job: { runStartedAt: number | null; timeRunBeforeMs: number }, now: number): number {
  return job.timeRunBeforeMs + (job.runStartedAt === null ? 0 : Math.max(0, now - job.runStartedAt));
}

export function credits(basis: ChargeBasis, periods: number): number {
  return basis.units * basis.pricePerUnit * periods;
}
