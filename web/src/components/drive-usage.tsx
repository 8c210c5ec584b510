import { useEffect, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { formatBytes } from '../format.ts';

interface DriveUsage {
  drive: string;
  owner: string;
  usedBytes: number;
  quotaBytes: number | null;
}

/**
 * What the drive holds (its job folders and Trash included) against its owner's storage quota;
 * at the quota, uploads, new folders and new jobs are refused, and this says how to get out.
 * Read again with `version`, after each change the page makes.
 */
export function DriveUsageLine(props: { drive: string | undefined; version: number }) {
  const [usage, setUsage] = useState<DriveUsage | null>(null);
  const { drive, version } = props;
  useEffect(() => {
    if (drive === undefined) return;
    getJson<{ items: DriveUsage[] }>('/api/files/usage').then(
      (r) => setUsage(r.items.find((u) => u.drive === drive) ?? null),
      () => setUsage(null),
    );
  }, [drive, version]);
  if (usage === null) return null;
  const { usedBytes, quotaBytes } = usage;
  if (quotaBytes === null) return <p class="muted">{formatBytes(usedBytes)} used (no quota)</p>;
  const full = usedBytes >= quotaBytes;
  return (
    <p class={full ? 'error' : 'muted'}>
      {formatBytes(usedBytes)} of {formatBytes(quotaBytes)} used (
      {Math.floor((100 * usedBytes) / Math.max(quotaBytes, 1))}%)
      {full &&
        ': the quota is used up, so uploads, new folders and new jobs are refused until you delete files or empty the Trash'}
    </p>
  );
}
