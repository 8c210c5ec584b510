/**
 * Schema migrations, applied in order and recorded in `schema_version`. Append only: a released
 * migration is never edited.
 */
export const MIGRATIONS: readonly string[] = [
  `
  create table users (
    name text primary key,
    admin integer not null default 0,
    created_at integer not null
  );
  create table projects (
    id text primary key,
    title text not null,
    created_at integer not null
  );
  create table memberships (
    project_id text not null references projects(id),
    username text not null references users(name),
    role text not null check (role in ('PI', 'ADMIN', 'USER')),
    primary key (project_id, username)
  );
  create index memberships_by_user on memberships(username);
  create table tokens (
    hash text primary key,
    username text not null references users(name),
    description text not null,
    created_at integer not null
  );
  create table jobs (
    id text primary key,
    created_by text not null,
    project text,
    state text not null,
    application text not null,
    created_at integer not null,
    specification text not null,
    time_allocation_ms integer,
    started_at integer,
    expires_at integer,
    output_folder text,
    exit_codes text,
    submitted integer not null default 0,
    price_per_unit real not null,
    credits_charged real not null default 0,
    charged_periods integer not null default 0,
    build text,
    update_count integer not null default 0
  );
  create index jobs_by_owner on jobs(created_by, project, id);
  create index jobs_by_project on jobs(project, id);
  create index jobs_active on jobs(state) where state not in ('SUCCESS', 'FAILURE', 'EXPIRED');
  create index jobs_expiring on jobs(expires_at) where expires_at is not null and state = 'RUNNING';
  create table job_updates (
    job_id text not null,
    seq integer not null,
    body text not null,
    primary key (job_id, seq)
  ) without rowid;
  create table idempotency (
    username text not null,
    key text not null,
    request_hash text not null,
    job_ids text not null,
    created_at integer not null,
    primary key (username, key)
  );
  create table allocations (
    id integer primary key,
    owner text not null,
    category text not null,
    credits real not null check (credits >= 0),
    start_at integer not null,
    end_at integer not null,
    created_at integer not null
  );
  create index allocations_by_owner on allocations(owner, category);
  create table charges (
    charge_id text primary key,
    job_id text not null,
    owner text not null,
    category text not null,
    units integer not null,
    periods integer not null,
    credits real not null,
    charged_at integer not null
  );
  create index charges_by_owner on charges(owner, category, charged_at);
  create index charges_by_job on charges(job_id);
  `,
  // Charges draw on allocations: each keeps what was used of it, so a balance needs no history.
  `
  alter table allocations add column used real not null default 0;
  `,
  // Interactive sessions: only a hash of each secret is kept; a ticket is traded once for a web session.
  `
  create table sessions (
    hash text primary key,
    kind text not null check (kind in ('TICKET', 'WEB', 'VNC', 'SHELL')),
    job_id text not null,
    rank integer not null,
    username text not null,
    created_at integer not null,
    last_used_at integer not null,
    expires_at integer not null
  );
  create index sessions_by_job on sessions(job_id);
  `,
  // Web interface sign-ins: sessions behind the UI's cookie and one-time sign-in links, by hash.
  `
  create table ui_sessions (
    hash text primary key,
    username text not null references users(name),
    created_at integer not null,
    last_used_at integer not null,
    expires_at integer not null
  );
  create table sign_in_links (
    hash text primary key,
    username text not null references users(name),
    expires_at integer not null
  );
  `,
  // A job is charged for the time it ran, over all its runs (suspended, it stops; resumed, it goes
  // on from its new start): the current run's start (none while no run is under way) and the time
  // of the runs before it. A job suspended before this kept no such time: it counts from 0.
  `
  alter table jobs add column run_started_at integer;
  alter table jobs add column time_run_before_ms integer not null default 0;
  update jobs set run_started_at = started_at where state in ('RUNNING', 'CANCELING');
  `,
  // Users' SSH public keys, which jobs with sshEnabled accept.
  `
  create table ssh_keys (
    id text primary key,
    owner text not null references users(name),
    title text not null,
    key text not null,
    fingerprint text not null,
    created_at integer not null
  );
  create index ssh_keys_by_owner on ssh_keys(owner, id);
  `,
  // Administrators disable users (their tokens and sign-ins stop working; enabled again, the tokens
  // work again), and every administrative action is kept in an audit log, newest by id.
  `
  alter table users add column disabled_at integer;
  create table audit_log (
    id integer primary key,
    at integer not null,
    actor text not null,
    action text not null,
    target text not null,
    details text not null
  );
  `,
  // Provider mode (UCloud Core drives ucompute): what Core must be told, in the order it happened,
  // kept until Core took it; and the applications Core resolved for its jobs, by name and version.
  `
  create table ucloud_outbox (
    seq integer primary key autoincrement,
    kind text not null check (kind in ('update', 'usage', 'charge')),
    job_id text not null,
    body text not null,
    created_at integer not null
  );
  create table ucloud_applications (
    name text not null,
    version text not null,
    body text not null,
    primary key (name, version)
  ) without rowid;
  `,
  // What running jobs use, per rank, sampled on a steady period (the live resource views): kept
  // for the job's life, thinned as it grows, removed when the job is cleaned up.
  `
  create table resource_samples (
    job_id text not null,
    rank integer not null,
    at integer not null,
    cpu real,
    memory integer,
    gpu real,
    gpu_memory integer,
    primary key (job_id, rank, at)
  ) without rowid;
  `,
];
