import { chargeUnits } from '../model/product.ts';
import {
  CHARGE_UNITS_ANNOTATION,
  PRICE_PER_UNIT_ANNOTATION,
  PRODUCT_ANNOTATION,
  UNIT_OF_PRICE_ANNOTATION,
} from '../volcano/labels.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Accounting: the charging basis travels with the job, so that periodic and final charges need
 * no catalogue lookup: units (replicas × vCPU, or × GPU for GPU-priced products), the price of a
 * unit per period, and the period.
 */
export const accountingPlugin: JobPlugin = {
  name: 'Accounting',
  onCreate(_ctx, job, build) {
    annotateJob(build, PRODUCT_ANNOTATION, `${job.product.id}/${job.product.category}`);
    annotateJob(build, CHARGE_UNITS_ANNOTATION, String(chargeUnits(job.product, job.replicas)));
    annotateJob(build, PRICE_PER_UNIT_ANNOTATION, String(job.product.pricePerUnit));
    annotateJob(build, UNIT_OF_PRICE_ANNOTATION, job.product.unitOfPrice ?? 'CREDITS_PER_MINUTE');
  },
};
