/**
 * The applications UCloud Core resolved for the jobs it sent (provider mode), as JSON by name and
 * version: a job's application is needed again after a restart (to build it, to open its sessions),
 * and UCloud never changes an application once published under a name and version.
 */
export interface UcloudApplicationStore {
  put(name: string, version: string, body: unknown): Promise<void>;
  get(name: string, version: string): Promise<unknown>;
  all(): Promise<unknown[]>;
}
