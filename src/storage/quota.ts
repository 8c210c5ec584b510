import { type FileHandle, lstat, open } from 'node:fs/promises';
import { formatBytes } from '../model/bytes.ts';
import { at, DIRECTORY, diskUse, openFolder, StorageError } from './folders.ts';

/**
 * Per-owner storage quotas. An owner's bytes are those of its drive (`/home/<user>`,
 * `/projects/<id>`), which holds its job folders (`<drive>/Jobs/…`) and its Trash: one `du` of the
 * drive measures all three. Measures are cached: what enters through the API is added as it is
 * written, and what jobs write in their folders is measured again by a periodic rescan
 * (jobs/quota-watch.ts), so a check costs a lookup, and a `du` only when a drive was never measured.
 * As UCloud locks a drive whose allocation is spent, an owner at or over its quota can neither
 * upload, make folders, copy, nor start jobs until it has freed space.
 */

/** Bytes an owner may use unless configured otherwise (`storage.quota.defaultBytes`). */
export const DEFAULT_QUOTA_BYTES = 100 * 1024 ** 3;

/** How old a drive's measure may get before the periodic rescan takes it again. */
export const RESCAN_AFTER_MS = 15 * 60_000;

export interface QuotaSettings {
  /** Bytes each owner may use; null: no limit. */
  defaultBytes?: number | null;
  /** Per owner (`user:alice`, `project:p1`): its own bytes, or null for no limit. */
  owners?: Record<string, number | null>;
}

/** What an owner uses of its quota, as the API shows it. */
export interface DriveUsage {
  drive: string;
  /** `user:<name>` or `project:<id>`. */
  owner: string;
  usedBytes: number;
  /** null: no limit. */
  quotaBytes: number | null;
  /** When the drive was last measured whole (epoch ms); writes through the API are added since. */
  measuredAt: number;
}

/** A write refused because it would pass its owner's storage quota (HTTP 402, as UCloud answers). */
export class QuotaExceeded extends Error {}

/** The owner of a drive, as accounts name it: `/home/alice` → `user:alice`. */
export function ownerOfDrive(drive: string): string {
  const [, kind, id] = drive.split('/');
  return `${kind === 'projects' ? 'project' : 'user'}:${id}`;
}

/** Why `usage` leaves no room for `adding` more bytes (0: for anything at all), or undefined. */
export function quotaProblem(usage: DriveUsage, adding: number): string | undefined {
  const { quotaBytes, usedBytes } = usage;
  if (quotaBytes === null) return undefined;
  if (adding === 0 ? usedBytes < quotaBytes : usedBytes + adding <= quotaBytes) return undefined;
  const [kind, id] = usage.owner.split(':');
  const holds = `${usage.drive} (its job folders and Trash included) holds ${formatBytes(usedBytes)} of its ${formatBytes(quotaBytes)}`;
  const what =
    adding === 0
      ? `the storage quota of ${kind} ${id} is used up: ${holds}`
      : `${formatBytes(adding)} more would pass the storage quota of ${kind} ${id}: ${holds}`;
  return `${what}; delete files or empty the Trash (ucompute files empty-trash ${usage.drive}), or ask an administrator for a larger quota (storage.quota)`;
}

export interface StorageQuotaOptions {
  root: string;
  settings?: QuotaSettings;
  now: () => number;
}

export type StorageQuotas = ReturnType<typeof storageQuotas>;

export function storageQuotas(o: StorageQuotaOptions) {
  const defaultBytes = o.settings?.defaultBytes === undefined ? DEFAULT_QUOTA_BYTES : o.settings.defaultBytes;
  const owners = o.settings?.owners ?? {};
  const measured = new Map<string, { bytes: number; at: number }>();
  /** Measures under way, so that concurrent requests share one `du` per drive. */
  const measuring = new Map<string, Promise<void>>();

  const quotaOf = (owner: string): number | null => (owner in owners ? owners[owner]! : defaultBytes);

  /** Measures the drive whole (a missing drive holds nothing) and caches the answer. */
  function measure(drive: string): Promise<void> {
    const under = measuring.get(drive);
    if (under) return under;
    const at = o.now();
    const pass = (async () => {
      const folder = await openFolder(o.root, drive, { create: false }).catch((e: unknown) => {
        if (e instanceof StorageError && e.code === 'ENOENT') return undefined;
        throw e;
      });
      const bytes = folder === undefined ? 0 : await diskUse(folder).finally(() => folder.close());
      measured.set(drive, { bytes, at });
    })().finally(() => measuring.delete(drive));
    measuring.set(drive, pass);
    return pass;
  }

  async function usage(drive: string): Promise<DriveUsage> {
    if (!measured.has(drive)) await measure(drive);
    const { bytes, at } = measured.get(drive)!;
    const owner = ownerOfDrive(drive);
    return { drive, owner, usedBytes: bytes, quotaBytes: quotaOf(owner), measuredAt: at };
  }

  return {
    usage,

    /** Throws QuotaExceeded unless the drive's owner has room for `adding` bytes (0: is not over). */
    async check(drive: string, adding = 0): Promise<void> {
      if (quotaOf(ownerOfDrive(drive)) === null) return;
      const problem = quotaProblem(await usage(drive), adding);
      if (problem !== undefined) throw new QuotaExceeded(problem);
    },

    /** Counts bytes written (negative: freed) into a measured drive until its next measure. */
    added(drive: string, bytes: number): void {
      const known = measured.get(drive);
      if (known) known.bytes = Math.max(0, known.bytes + bytes);
    },

    /** Drops the drive's measure: the next check measures it again (after a deletion). */
    forget(drive: string): void {
      measured.delete(drive);
    },

    /** Measures `drives` again, and every other measure older than RESCAN_AFTER_MS, one at a time. */
    async rescan(drives: Iterable<string>): Promise<void> {
      const due = new Set(drives);
      for (const [drive, { at }] of measured) if (o.now() - at >= RESCAN_AFTER_MS) due.add(drive);
      for (const drive of due) await measure(drive);
    },
  };
}

/** Bytes `name` in the open folder takes on disk: a folder's with all below it (by `du`). */
export async function bytesAt(parent: FileHandle, name: string): Promise<number> {
  const s = await lstat(at(parent, name));
  if (!s.isDirectory()) return s.blocks * 512;
  const folder = await open(at(parent, name), DIRECTORY);
  return diskUse(folder).finally(() => folder.close());
}
