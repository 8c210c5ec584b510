import { createHash, randomUUID } from 'node:crypto';
import { IssueList } from '../model/errors.ts';
import type { SshKeyRecord } from '../store/ssh-keys.ts';
import type { Transactional } from '../store/store.ts';
import { type Caller, pageSize } from './access.ts';
import { notFound } from './errors.ts';

// Users' SSH public keys (UCloud's ssh.create, ssh.browse, ssh.delete): jobs with sshEnabled
// accept their owner's keys. A key becomes one line of an authorized_keys file, so only a plain
// public key of a known type is taken: no options, no second line.

/** UCloud's SSHKey. */
export interface SshKey {
  id: string;
  owner: string;
  createdAt: number;
  fingerprint: string;
  specification: { title: string; key: string };
}

export interface SshKeyPage {
  items: SshKey[];
  next: string | null;
  itemsPerPage: number;
}

const MIN_RSA_BITS = 2048;
const MAX_KEY_CHARS = 16_384;
const MAX_TITLE_CHARS = 200;
const CONTROL = /\p{Cc}/u;
/** The public point of each curve: 0x04, then both coordinates. */
const ECDSA_POINT_BYTES: Record<string, number> = { nistp256: 65, nistp384: 97, nistp521: 133 };

/** Length-prefixed fields of an OpenSSH key blob, in order; undefined when it is malformed. */
function fields(blob: Buffer): Buffer[] | undefined {
  const out: Buffer[] = [];
  for (let at = 0; at < blob.length; ) {
    if (at + 4 > blob.length) return undefined;
    const length = blob.readUInt32BE(at);
    if (at + 4 + length > blob.length) return undefined;
    out.push(blob.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return out;
}

/** The bits of an SSH mpint (big-endian, a leading zero byte when the top bit is set). */
function bitLength(mpint: Buffer): number {
  let i = 0;
  while (i < mpint.length && mpint[i] === 0) i++;
  if (i === mpint.length) return 0;
  return (mpint.length - i - 1) * 8 + (32 - Math.clz32(mpint[i]!));
}

/** Why a key blob is not a usable key of its type; undefined when it is one. */
function blobProblem(type: string, parts: Buffer[]): string | undefined {
  const [name, ...rest] = parts;
  if (name?.toString('latin1') !== type) return `its key data is not a ${type} key`;
  if (type === 'ssh-ed25519')
    return rest.length === 1 && rest[0]!.length === 32 ? undefined : 'is not a valid ssh-ed25519 key';
  if (type === 'ssh-rsa') {
    if (rest.length !== 2) return 'is not a valid ssh-rsa key';
    const bits = bitLength(rest[1]!);
    return bits >= MIN_RSA_BITS
      ? undefined
      : `is a ${bits}-bit RSA key; at least ${MIN_RSA_BITS} bits are needed`;
  }
  const curve = type.slice('ecdsa-sha2-'.length);
  return rest.length === 2 &&
    rest[0]!.toString('latin1') === curve &&
    rest[1]!.length === ECDSA_POINT_BYTES[curve]
    ? undefined
    : `is not a valid ${type} key`;
}

const KEY_LINE = /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) ([A-Za-z0-9+/]+={0,2})(?: +(.*))?$/;

/**
 * An OpenSSH public key (ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or
 * more) as one authorized_keys line with its SHA256 fingerprint, or why it is not one.
 */
export function parsePublicKey(text: string): { line: string; fingerprint: string } | { problem: string } {
  const trimmed = text.trim();
  if (trimmed.length > MAX_KEY_CHARS) return { problem: `must be at most ${MAX_KEY_CHARS} characters` };
  if (CONTROL.test(trimmed)) return { problem: 'must be one line (one public key)' };
  const match = KEY_LINE.exec(trimmed);
  if (!match) {
    return {
      problem:
        'must be an OpenSSH public key: ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa, then its key data (e.g. the contents of ~/.ssh/id_ed25519.pub)',
    };
  }
  const [, type, data, comment] = match as unknown as [string, string, string, string | undefined];
  const blob = Buffer.from(data, 'base64');
  const parts = blob.toString('base64') === data ? fields(blob) : undefined;
  const problem = parts ? blobProblem(type, parts) : 'has key data that is not valid base64 of an SSH key';
  if (problem) return { problem };
  const fingerprint = `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
  return { line: comment ? `${type} ${data} ${comment}` : `${type} ${data}`, fingerprint };
}

const present = (k: SshKeyRecord): SshKey => ({
  id: k.id,
  owner: k.owner,
  createdAt: k.createdAt,
  fingerprint: k.fingerprint,
  specification: { title: k.title, key: k.key },
});

export type SshKeys = ReturnType<typeof sshKeys>;

export function sshKeys(store: Transactional, now: () => number = Date.now) {
  const keys = store.sshKeys;
  return {
    /** Checks every item, then stores them all; answers their ids. Bad items name their field. */
    async create(caller: Caller, items: readonly { title: string; key: string }[]): Promise<string[]> {
      const issues = new IssueList();
      const at = now();
      const records = items.map((item, i): SshKeyRecord | undefined => {
        const title = item.title.trim();
        if (title === '' || title.length > MAX_TITLE_CHARS || CONTROL.test(title)) {
          issues.add(`items[${i}].title`, `must be 1 to ${MAX_TITLE_CHARS} characters on one line`);
        }
        const parsed = parsePublicKey(item.key);
        if ('problem' in parsed) {
          issues.add(`items[${i}].key`, parsed.problem);
          return undefined;
        }
        return {
          id: randomUUID(),
          owner: caller.username,
          title,
          key: parsed.line,
          fingerprint: parsed.fingerprint,
          createdAt: at,
        };
      });
      issues.throwIfAny();
      const stored = records as SshKeyRecord[];
      await keys.insert(stored);
      return stored.map((k) => k.id);
    },

    /** The caller's own keys, oldest first (UCloud's PageV2). */
    async browse(caller: Caller, o: { itemsPerPage?: number; next?: string }): Promise<SshKeyPage> {
      const limit = pageSize(o.itemsPerPage);
      const found = await keys.page(caller.username, o.next ?? '', limit + 1);
      const items = found.slice(0, limit).map(present);
      return { items, next: found.length > limit ? (items.at(-1)?.id ?? null) : null, itemsPerPage: limit };
    },

    /** Removes the caller's keys with these ids; 404 (and nothing removed) when one is not theirs. */
    async remove(caller: Caller, ids: readonly string[]): Promise<void> {
      const own = new Set((await keys.of(caller.username)).map((k) => k.id));
      ids.forEach((id, i) => {
        if (!own.has(id)) throw notFound(`items[${i}].id: ssh key ${id}`);
      });
      await keys.remove(caller.username, ids);
    },

    /** UCloud's browseSshKeys{jobId}: the authorized_keys lines a job of this user accepts. */
    async authorizedKeys(username: string): Promise<string[]> {
      return (await keys.of(username)).map((k) => k.key);
    },
  };
}
