import type { JobMirror } from '../jobs/mirror.ts';
import type { JobUpdate } from '../model/job.ts';
import { accountOf, type Owner } from '../model/owner.ts';

// What Core is told, written down in the transaction of the change it tells of (the delivery in
// ./delivery.ts sends it). Shapes: SDU-eScience/UCloud `provider-integration/shared/pkg/
// orchestrators/jobs.go:118-128` (JobUpdate) and `resource.go:166` (ResourceUpdateAndId), and
// `shared/pkg/accounting/accounting.go:196-214` (ReportUsageRequest).

/** One item of `POST /api/jobs/control/update`. */
export interface CoreJobUpdate {
  id: string;
  update: Omit<JobUpdate, 'expectedState' | 'expectedDifferentState' | 'newMounts'>;
}

/** UCloud's WalletOwner. */
export type WalletOwner = { type: 'user'; username: string } | { type: 'project'; projectId: string };

/** An item of `POST /api/accounting/v2/reportUsage`, with whose jobs to stop if Core says no. */
export interface UsageEntry {
  request: {
    isDeltaCharge: boolean;
    owner: WalletOwner;
    categoryIdV2: { name: string; provider: string };
    usage: number;
    description: { scope: string; description: string };
  };
  account: string;
  category: string;
}

/** An item of the legacy `POST /api/jobs/control/chargeCredits` (Kotlin Core). */
export interface ChargeEntry {
  request: { id: string; chargeId: string; units: number; periods: number; description: string };
  account: string;
  category: string;
}

export function walletOwner(owner: Owner): WalletOwner {
  return owner.project !== undefined
    ? { type: 'project', projectId: owner.project }
    : { type: 'user', username: owner.createdBy };
}

/**
 * The JobMirror of provider mode: every applied update becomes a `jobs/control/update` item, every
 * charge the job's usage so far (absolute within the job's scope, as IM2 reports it, so that a
 * report sent twice counts once) and, where configured, a legacy charge.
 */
export function coreMirror(o: {
  providerId: string;
  legacyChargeCredits: boolean;
  now: () => number;
}): JobMirror {
  const { providerId, now } = o;
  return {
    async updateWritten(tx, jobId, update) {
      const { expectedState, expectedDifferentState, newMounts, ...told } = update;
      const item: CoreJobUpdate = { id: jobId, update: told };
      await tx.ucloudOutbox.add('update', jobId, item, now());
    },
    async chargeWritten(tx, charge, owner, totalCredits) {
      const account = accountOf(owner);
      const usage: UsageEntry = {
        request: {
          isDeltaCharge: false,
          owner: walletOwner(owner),
          categoryIdV2: { name: charge.category, provider: providerId },
          usage: Math.round(totalCredits),
          description: { scope: `job-${charge.jobId}`, description: `job ${charge.jobId}` },
        },
        account,
        category: charge.category,
      };
      await tx.ucloudOutbox.add('usage', charge.jobId, usage, now());
      if (!o.legacyChargeCredits) return;
      const legacy: ChargeEntry = {
        request: {
          id: charge.jobId,
          chargeId: charge.chargeId,
          units: charge.units,
          periods: charge.periods,
          description: `job ${charge.jobId}`,
        },
        account,
        category: charge.category,
      };
      await tx.ucloudOutbox.add('charge', charge.jobId, legacy, now());
    },
  };
}
