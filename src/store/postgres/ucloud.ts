import type { UcloudApplicationStore } from '../ucloud-applications.ts';
import type { OutboxKind, UcloudOutboxStore } from '../ucloud-outbox.ts';
import type { Connection } from './database.ts';

export function postgresUcloudOutbox({ query }: Connection): UcloudOutboxStore {
  return {
    async add(kind, jobId, body, at) {
      await query(
        'insert into ucloud_outbox (kind, job_id, body, created_at) values (?, ?, ?, ?)',
        kind,
        jobId,
        JSON.stringify(body),
        at,
      );
    },
    async oldest(limit) {
      const rows = await query('select * from ucloud_outbox order by seq limit ?', limit);
      return rows.map((r) => ({
        seq: Number(r.seq),
        kind: r.kind as OutboxKind,
        jobId: r.job_id as string,
        body: JSON.parse(r.body as string),
        createdAt: Number(r.created_at),
      }));
    },
    async remove(seqs) {
      await query('delete from ucloud_outbox where seq = any(?::bigint[])', seqs);
    },
    async size() {
      const [r] = await query('select count(*) as n from ucloud_outbox');
      return Number(r!.n);
    },
  };
}

export function postgresUcloudApplications({ query }: Connection): UcloudApplicationStore {
  return {
    async put(name, version, body) {
      await query(
        'insert into ucloud_applications (name, version, body) values (?, ?, ?) on conflict (name, version) do update set body = excluded.body',
        name,
        version,
        JSON.stringify(body),
      );
    },
    async get(name, version) {
      const [r] = await query(
        'select body from ucloud_applications where name = ? and version = ?',
        name,
        version,
      );
      return r === undefined ? undefined : JSON.parse(r.body as string);
    },
    async all() {
      const rows = await query('select body from ucloud_applications order by name, version');
      return rows.map((r) => JSON.parse(r.body as string));
    },
  };
}
