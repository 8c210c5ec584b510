import type { Owner } from '../model/owner.ts';
import type { Store } from './store.ts';

// Credit reservations: every active job holds back from its owner's balance what it can spend
// before its next charge, so that what jobs started together can spend never exceeds what their
// owner has. A job's reservation is set once, in the transaction that accepts it; it counts while
// the job is active.

export type CreditReservations = ReturnType<typeof creditReservations>;

export function creditReservations(store: Store) {
  const { db } = store;
  const set = db.prepare('update jobs set reserved_credits = ? where id = ?');
  const ACTIVE = "state not in ('SUCCESS', 'FAILURE', 'EXPIRED')";
  const CATEGORY = "json_extract(specification, '$.product.category') = ?";
  const ofUser = db.prepare(
    `select coalesce(sum(reserved_credits), 0) as credits from jobs
     where ${ACTIVE} and created_by = ? and project is null and ${CATEGORY}`,
  );
  const ofProject = db.prepare(
    `select coalesce(sum(reserved_credits), 0) as credits from jobs
     where ${ACTIVE} and project = ? and ${CATEGORY}`,
  );

  return {
    /** Sets a job's reservation; call in the transaction that inserts it. */
    reserve(jobId: string, credits: number): void {
      set.run(credits, jobId);
    },
    /** What the owner's active jobs hold back in a category. */
    held(owner: Owner, category: string): number {
      const row =
        owner.project !== undefined
          ? ofProject.get(owner.project, category)
          : ofUser.get(owner.createdBy, category);
      return Number(row?.credits ?? 0);
    },
  };
}
