// Users' SSH public keys, which jobs with sshEnabled accept.

export interface SshKeyRecord {
  id: string;
  owner: string;
  title: string;
  /** One line of an authorized_keys file: type, key, and a comment when it had one. */
  key: string;
  fingerprint: string;
  createdAt: number;
}

/** Users' SSH public keys, in the order they were added. */
export interface SshKeyStore {
  insert(keys: readonly SshKeyRecord[]): Promise<void>;
  /** Up to `limit` keys of an owner in the order they were added, after the key `after`. */
  page(owner: string, after: string, limit: number): Promise<SshKeyRecord[]>;
  of(owner: string): Promise<SshKeyRecord[]>;
  /** Removes the owner's keys with these ids (another owner's are left alone). */
  remove(owner: string, ids: readonly string[]): Promise<void>;
}
