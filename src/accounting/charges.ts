import { chargeUnits, type Product, periodMillis, type UnitOfPrice } from '../model/product.ts';

/**
 * What a job is charged by, fixed when the job is made: units (replicas × vCPU, or × GPU), the
 * credits a unit costs per charge period, and that period's length.
 */
export interface ChargeBasis {
  units: number;
  pricePerUnit: number;
  periodMs: number;
}

/**
 * A job's basis: the product's price per unit, per `chargePeriodMs` when the operator set one
 * (accounting.chargePeriodMs; chargePeriodProblem has checked it comes out in whole credits), else
 * per the product's own period (a minute for CREDITS_PER_MINUTE, as UCloud charges).
 */
export function chargeBasisOf(
  product: Product,
  replicas: number,
  chargePeriodMs: number | null,
): ChargeBasis {
  return {
    units: chargeUnits(product, replicas),
    ...pricePerPeriod(product.pricePerUnit, product.unitOfPrice, chargePeriodMs),
  };
}

/** A unit's price per charge period, from its price per `unitOfPrice`. */
export function pricePerPeriod(
  pricePerUnit: number,
  unitOfPrice: UnitOfPrice | undefined,
  chargePeriodMs: number | null,
): Pick<ChargeBasis, 'pricePerUnit' | 'periodMs'> {
  const ownPeriod = periodMillis(unitOfPrice);
  if (chargePeriodMs === null || chargePeriodMs === ownPeriod) return { pricePerUnit, periodMs: ownPeriod };
  return { pricePerUnit: (pricePerUnit * chargePeriodMs) / ownPeriod, periodMs: chargePeriodMs };
}

/**
 * Why the operator's `chargePeriodMs` cannot be used (undefined: it can, or none is set): in mode
 * ucloud-provider Core charges; otherwise the first product whose price per period would not be a
 * whole number of credits (balances and charges stay exact), naming what would work.
 */
export function chargePeriodProblem(
  products: readonly Product[],
  chargePeriodMs: number | undefined,
  mode: string | undefined,
): string | undefined {
  if (chargePeriodMs === undefined) return undefined;
  const field = 'accounting.chargePeriodMs';
  if (mode === 'ucloud-provider') {
    return `${field}: in mode ucloud-provider UCloud Core charges jobs, by each product's own period; remove it`;
  }
  for (const p of products) {
    const { pricePerUnit } = pricePerPeriod(p.pricePerUnit, p.unitOfPrice, chargePeriodMs);
    if (Number.isInteger(pricePerUnit)) continue;
    const unit = p.unitOfPrice ?? 'CREDITS_PER_MINUTE';
    return `${field}: ${chargePeriodMs} ms would price product ${p.id} (${p.pricePerUnit} ${unit}) at ${pricePerUnit} credits per unit and period; choose a period that makes every product's price a whole number of credits (e.g. ${periodMillis(unit)}, its own period), or change its price`;
  }
  return undefined;
}

/**
 * Charge periods owed for a job that has run `timeRunMs` in all, of which `alreadyCharged` were
 * charged. While it runs only whole periods are due; when a run ends (or is suspended) the started
 * period counts too (a 61-second job pays for two minutes), and so a job that `ran` at all pays a
 * period however short its run measured (the end a backend reports, in whole seconds, can come
 * before the start ucompute saw). A job that never ran owes nothing.
 */
export function periodsDue(
  timeRunMs: number,
  periodMs: number,
  alreadyCharged: number,
  final: boolean,
  ran: boolean,
): number {
  if (!ran) return 0;
  const elapsed = Math.max(0, timeRunMs) / periodMs;
  const owed = final ? Math.max(1, Math.ceil(elapsed)) : Math.floor(elapsed);
  return Math.max(0, owed - alreadyCharged);
}

/** How long a job has run up to `now`: its earlier runs and the current one; suspended time is not. */
export function timeRun(job: { runStartedAt: number | null; timeRunBeforeMs: number }, now: number): number {
  return job.timeRunBeforeMs + (job.runStartedAt === null ? 0 : Math.max(0, now - job.runStartedAt));
}

export function credits(basis: ChargeBasis, periods: number): number {
  return basis.units * basis.pricePerUnit * periods;
}
