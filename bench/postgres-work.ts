import pg from 'pg';

/**
 * What PostgreSQL does per job (ha.bench --tables): from `start` until every job of the database has
 * ended, the rows each table gained, changed (HOT: no index written) and lost, with the indexes an
 * insert or a non-HOT update writes; and each statement's calls, rows, time, buffers dirtied and WAL
 * (pg_stat_statements, which the server must preload: postgresSettings before its first use), all
 * per job. Counts are PostgreSQL's cumulative statistics, flushed by each backend at most once a
 * second, hence the wait before the last reading.
 */
export async function postgresWork(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('create extension if not exists pg_stat_statements');
  await client.query('select pg_stat_statements_reset()');
  const tables = async () =>
    new Map(
      (
        await client.query<{ name: string; ins: string; upd: string; hot: string; del: string }>(
          `select coalesce(owner.relname, t.relname) || case when t.schemaname = 'pg_toast' then ' (TOAST)' else '' end as name,
             t.n_tup_ins as ins, t.n_tup_upd as upd, t.n_tup_hot_upd as hot, t.n_tup_del as del
           from pg_stat_all_tables t left join pg_class owner on owner.reltoastrelid = t.relid
           where t.schemaname in ('public', 'pg_toast')`,
        )
      ).rows.map((r) => [r.name, [Number(r.ins), Number(r.upd), Number(r.hot), Number(r.del)]] as const),
    );
  const before = await tables();

  return {
    /** Once every job has ended (up to `timeoutMs`): the table of it all, per job, as Markdown. */
    async done(timeoutMs = 120_000): Promise<string> {
      try {
        const deadline = Date.now() + timeoutMs;
        const count = async (where: string) =>
          Number((await client.query(`select count(*) as n from jobs ${where}`)).rows[0].n);
        while ((await count("where state not in ('SUCCESS', 'FAILURE', 'EXPIRED')")) > 0) {
          if (Date.now() > deadline) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        const active = await count("where state not in ('SUCCESS', 'FAILURE', 'EXPIRED')");
        await new Promise((r) => setTimeout(r, 2000));
        const jobs = await count('');
        const after = await tables();
        const indexes = new Map(
          (
            await client.query<{ name: string; n: string }>(
              `select relname as name, count(*) as n from pg_stat_user_indexes group by relname`,
            )
          ).rows.map((r) => [r.name, Number(r.n)]),
        );
        const per = (n: number) => (n / jobs).toFixed(2);
        const lines = [
          `${jobs} jobs (${active} not ended when read); per job:`,
          '',
          '| table | inserted | updated | of which HOT | deleted | indexes |',
          '| --- | ---: | ---: | ---: | ---: | ---: |',
        ];
        for (const [name, a] of after) {
          const b = before.get(name) ?? [0, 0, 0, 0];
          const d = a.map((x, i) => x - b[i]!);
          if (d.every((x) => x === 0)) continue;
          lines.push(
            `| ${name} | ${per(d[0]!)} | ${per(d[1]!)} | ${per(d[2]!)} | ${per(d[3]!)} | ${indexes.get(name) ?? ''} |`,
          );
        }
        const { rows } = await client.query<Record<string, string>>(
          `select toplevel, calls, rows, total_exec_time as ms, total_plan_time as plan_ms,
             shared_blks_hit + shared_blks_read as blocks, shared_blks_dirtied as dirtied, wal_records, wal_bytes,
             regexp_replace(query, '\\s+', ' ', 'g') as query
           from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
           order by total_exec_time desc limit 30`,
        );
        lines.push(
          '',
          'statements (pg_stat_statements, nested ones too: in functions, triggers, EXECUTE), per job, most time first:',
          '',
          '| top | calls | rows | exec ms | plan ms | blocks | dirtied | WAL records | WAL bytes | statement |',
          '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
        );
        for (const r of rows) {
          lines.push(
            `| ${r.toplevel ? 'y' : 'n'} | ${per(Number(r.calls))} | ${per(Number(r.rows))} | ${(Number(r.ms) / jobs).toFixed(3)} | ` +
              `${(Number(r.plan_ms) / jobs).toFixed(3)} | ${per(Number(r.blocks))} | ${per(Number(r.dirtied))} | ` +
              `${per(Number(r.wal_records))} | ${Math.round(Number(r.wal_bytes) / jobs)} | ${r.query!.slice(0, 160).replaceAll('|', '\\|')} |`,
          );
        }
        return lines.join('\n');
      } finally {
        await client.end();
      }
    },
  };
}
