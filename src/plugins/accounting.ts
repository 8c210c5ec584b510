import { type ChargeBasis, credits, periodsDue, pricePerPeriod, timeRun } from '../accounting/charges.ts';
import { accountOf } from '../model/owner.ts';
import { chargeUnits, type UnitOfPrice } from '../model/product.ts';
import {
  CHARGE_PERIOD_ANNOTATION,
  CHARGE_UNITS_ANNOTATION,
  PRICE_PER_UNIT_ANNOTATION,
  PRODUCT_ANNOTATION,
  UNIT_OF_PRICE_ANNOTATION,
} from '../volcano/labels.ts';
import { annotateJob } from './builder.ts';
import type { ActiveJob, JobPlugin, LifecycleContext } from './plugin.ts';

export const NO_CREDITS_STATUS = 'The job was terminated (no credits)';

/** The job's charging basis, from the annotations onCreate put on it. */
function chargeBasis({ annotations }: ActiveJob): ChargeBasis {
  const chargePeriod = annotations[CHARGE_PERIOD_ANNOTATION];
  return {
    units: Number(annotations[CHARGE_UNITS_ANNOTATION] ?? 0),
    ...pricePerPeriod(
      Number(annotations[PRICE_PER_UNIT_ANNOTATION] ?? 0),
      (annotations[UNIT_OF_PRICE_ANNOTATION] ?? 'CREDITS_PER_MINUTE') as UnitOfPrice,
      chargePeriod === undefined ? null : Number(chargePeriod),
    ),
  };
}

/**
 * Charges the periods the job owes for the time it has run: up to now while it runs, up to its
 * end once ended or suspended (`final`: the started period counts too, unless the job is ending
 * because its owner could not pay for it: that period is the one its reservation could not
 * cover). Answers the owner's account and category when its jobs there must stop: its balance
 * could not pay all the periods due, or what it has left cannot pay for its active jobs' next periods.
 */
async function chargeJob(
  ctx: LifecycleContext,
  job: ActiveJob,
  final: boolean,
): Promise<{ account: string; category: string } | undefined> {
  const { annotations } = job;
  const basis = chargeBasis(job);
  const startedPeriodDue = final && job.outcome?.kind !== 'OUT_OF_CREDITS';
  // An ended or suspended job's run is over (its time counted up to its end): now adds nothing.
  const periods = periodsDue(
    timeRun(job, ctx.now()),
    basis.periodMs,
    job.chargedPeriods,
    startedPeriodDue,
    job.startedAt !== null,
  );
  if (periods === 0) return undefined;
  const category = (annotations[PRODUCT_ANNOTATION] ?? '').split('/')[1] ?? '';
  const { creditsLeft, unpaid } = await ctx.charge({
    job,
    firstPeriod: job.chargedPeriods,
    periods,
    units: basis.units,
    credits: credits(basis, periods),
    category,
  });
  if ((unpaid > 0 || creditsLeft < 0) && basis.pricePerUnit > 0)
    return { account: accountOf(job.owner), category };
  return undefined;
}

/** chargeJob, then the owner's jobs in that category stopped if it could not pay. */
async function chargeOrStop(ctx: LifecycleContext, job: ActiveJob, final: boolean): Promise<void> {
  const unpaid = await chargeJob(ctx, job, final);
  if (unpaid) await ctx.stopJobsOf(unpaid.account, unpaid.category, NO_CREDITS_STATUS);
}

/**
 * Accounting: the charging basis travels with the job, so that periodic and final charges need
 * no catalogue lookup: units (replicas × vCPU, or × GPU for GPU-priced products), the price of a
 * unit per period, the period, and the operator's charge period if it set one. While the job
 * runs, every whole period is charged; at the end
 * the started period too, and so at a suspension; the time suspended costs nothing. Each charge
 * covers named periods, so a retry never charges twice. An owner whose credits cannot pay for its
 * active jobs' next periods (their reservations, src/jobs/credit-check.ts) has its jobs in
 * that category stopped, and pays for whole periods only: its balance never falls below 0.
 */
export const accountingPlugin: JobPlugin = {
  name: 'Accounting',
  onCreate(ctx, job, build) {
    annotateJob(build, PRODUCT_ANNOTATION, `${job.product.id}/${job.product.category}`);
    annotateJob(build, CHARGE_UNITS_ANNOTATION, String(chargeUnits(job.product, job.replicas)));
    annotateJob(build, PRICE_PER_UNIT_ANNOTATION, String(job.product.pricePerUnit));
    annotateJob(build, UNIT_OF_PRICE_ANNOTATION, job.product.unitOfPrice ?? 'CREDITS_PER_MINUTE');
    const { chargePeriodMs } = ctx.config;
    if (chargePeriodMs !== null) annotateJob(build, CHARGE_PERIOD_ANNOTATION, String(chargePeriodMs));
  },
  // The running jobs' charges asked for together: they are written in one batch (ctx.charge, one
  // transaction for all; one at a time, a minute's charges of 10,000 running jobs were ~5
  // statements each). Each owner and category that could not pay is stopped once, after.
  async onJobMonitoring(ctx, batch) {
    const running = batch.filter((job) => job.state === 'RUNNING');
    const unpaid = new Map<string, { account: string; category: string }>();
    for (const owing of await Promise.all(running.map((job) => chargeJob(ctx, job, false)))) {
      if (owing) unpaid.set(JSON.stringify([owing.account, owing.category]), owing);
    }
    for (const { account, category } of unpaid.values()) {
      await ctx.stopJobsOf(account, category, NO_CREDITS_STATUS);
    }
  },
  // The next period falls due once the run, from its start, reaches one more whole period.
  monitoringDueAt(_ctx, job) {
    if (job.state !== 'RUNNING' || job.runStartedAt === null) return null;
    return job.runStartedAt + (job.chargedPeriods + 1) * chargeBasis(job).periodMs - job.timeRunBeforeMs;
  },
  async onJobComplete(ctx, job) {
    await chargeOrStop(ctx, job, true);
  },
  // A suspended job pays up to the suspension, as at an end (the started period too); resumed, it
  // pays on from its new start, the period paid ahead first.
  async onJobSuspend(ctx, job) {
    await chargeOrStop(ctx, job, true);
  },
};
