import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PEERS_ANNOTATION } from '../../../volcano/labels.ts';
import type { LocalContext } from './context.ts';
import { type JobRun, jobDir } from './job-run.ts';

/** The jobs a job is connected to (ConnectToJob), by the hostname its pods reach them at. */
export function peersOf(run: JobRun): { hostname: string; jobId: string }[] {
  const text = run.job.metadata.annotations?.[PEERS_ANNOTATION];
  return text ? (JSON.parse(text) as { hostname: string; jobId: string }[]) : [];
}

/**
 * /etc/hosts of every pod of the job: its pods as `<pod>` and `<pod>.<job>`, its peers by hostname.
 * Each pod has its own file among its records (on tmpfs as root), not one of the job's on disk:
 * creating a file on ext4 from the event loop was a few percent of its CPU in a burst of jobs.
 */
export async function writeHosts(ctx: LocalContext, run: JobRun): Promise<void> {
  const lines = ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback'];
  for (const p of run.pods.values()) {
    if (p.pod) lines.push(`${p.pod.ip}\t${p.plan.hostname}.${p.plan.subdomain} ${p.plan.hostname}`);
  }
  for (const alias of run.job.spec.tasks[0]?.template.spec.hostAliases ?? []) {
    lines.push(`${alias.ip}\t${alias.hostnames.join(' ')}`);
  }
  for (const peer of peersOf(run)) {
    const target = ctx.runs.get(peer.jobId);
    const first = target && [...target.pods.values()].find((p) => p.pod);
    if (first?.pod) lines.push(`${first.pod.ip}\t${peer.hostname}`);
  }
  // Written in place (truncated, the same file): each pod binds its very file, so a restarted
  // replica's address reaches all.
  const text = `${lines.join('\n')}\n`;
  for (const p of run.pods.values()) {
    if (!p.pod) continue;
    try {
      writeFileSync(p.pod.hostsFile, text);
    } catch (error) {
      // A pod being destroyed: its records are gone, and it starts no container any more.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  // Pods an older ucompute started bind the job's own file: kept up to date while it is there.
  const older = join(jobDir(ctx.jobsDir, run.id), 'hosts');
  if (existsSync(older)) writeFileSync(older, text);
}

/** ConnectToJob, enforced: a job's pods reach each other and their peers' pods, both ways. */
export async function connectNetwork(ctx: LocalContext, run: JobRun): Promise<void> {
  const related = new Set<JobRun>([run]);
  for (const peer of peersOf(run)) {
    const target = ctx.runs.get(peer.jobId);
    if (target) related.add(target);
  }
  for (const other of ctx.runs.values()) {
    if (peersOf(other).some((p) => p.jobId === run.id)) related.add(other);
  }
  for (const r of related) {
    const addresses = new Set<string>();
    for (const member of [r, ...(r === run ? related : [run])]) {
      for (const p of member.pods.values()) if (p.pod) addresses.add(p.pod.ip);
    }
    await Promise.all([...r.pods.values()].map((p) => p.pod?.allowPeers([...addresses])));
  }
}
