// What an owner's active jobs hold back in a category (JobStore.heldCredits) as the changes of
// that sum, one row each, written by triggers on the jobs table: a job holding credits accepted
// active (+ its reservation), ended (−), made active again (+), deleted while active (−). Read on
// every charge and intake, the sum over the owner's active jobs was one index entry per job:
// 4.5–16 ms a charge with 10,000 live jobs of one owner, and quadratic over a minute's charges.
// Rows are only ever inserted (folded by foldHeldCredits, with the owner's allocations locked),
// never updated in place: no per-owner row that every job end of that owner would lock on
// PostgreSQL. A job's reservation, owner and category are written once, at its insert.

const FINAL = "('SUCCESS', 'FAILURE', 'EXPIRED')";
/** accountOf (src/model/owner.ts) of a jobs row, `row` being `new` or `old`. */
const account = (row: string) =>
  `case when ${row}.project is null then 'user:' || ${row}.created_by else 'project:' || ${row}.project end`;
/** A row of held_credits for the job `row`, with `credits`. */
const change = (row: string, credits: string) =>
  `insert into held_credits (account, category, credits)
     values (${account(row)}, ${row}.product_category, ${credits});`;

const TABLE = `
  create table held_credits (
    account text not null,
    category text,
    credits real not null
  );
  create index held_credits_of on held_credits(account, category);
  insert into held_credits (account, category, credits)
    select ${account('jobs')}, product_category, sum(reserved_credits) from jobs
    where state not in ${FINAL} and reserved_credits <> 0
    group by 1, 2;
  drop index jobs_held_by_project;
  drop index jobs_held_by_user;
`;

// Typed where it is listed (migrations.ts's MIGRATIONS): importing the type here made an import cycle.
export const HELD_CREDITS_MIGRATION = {
  sqlite: `${TABLE}
  create trigger held_credits_inserted after insert on jobs
    when new.reserved_credits <> 0 and new.state not in ${FINAL}
  begin
    ${change('new', 'new.reserved_credits')}
  end;
  create trigger held_credits_state after update of state on jobs
    when new.reserved_credits <> 0 and (old.state in ${FINAL}) <> (new.state in ${FINAL})
  begin
    ${change('new', `case when new.state in ${FINAL} then -new.reserved_credits else new.reserved_credits end`)}
  end;
  create trigger held_credits_deleted after delete on jobs
    when old.reserved_credits <> 0 and old.state not in ${FINAL}
  begin
    ${change('old', '-old.reserved_credits')}
  end;
  `,
  postgres: `${TABLE}
  create function held_credits_change() returns trigger language plpgsql as $$
  begin
    if tg_op = 'INSERT' then
      if new.reserved_credits <> 0 and new.state not in ${FINAL} then
        ${change('new', 'new.reserved_credits')}
      end if;
    elsif tg_op = 'UPDATE' then
      if new.reserved_credits <> 0 and (old.state in ${FINAL}) <> (new.state in ${FINAL}) then
        ${change('new', `case when new.state in ${FINAL} then -new.reserved_credits else new.reserved_credits end`)}
      end if;
    elsif old.reserved_credits <> 0 and old.state not in ${FINAL} then
      ${change('old', '-old.reserved_credits')}
    end if;
    return null;
  end $$;
  create trigger held_credits_changed after insert or update of state or delete on jobs
    for each row execute function held_credits_change();
  `,
};
