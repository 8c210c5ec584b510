import type { StorageQuotas } from '../../storage/quota.ts';
import type { ApiRoutes } from '../api.ts';
import { accountingRoutes } from './accounting.ts';
import { adminRoutes } from './admin.ts';
import { adminDirectoryRoutes } from './admin-directory.ts';
import { authRoutes } from './auth.ts';
import { catalogRoutes } from './catalog.ts';
import { fileRoutes } from './files.ts';
import { jobRoutes } from './jobs.ts';
import { resourceRoutes } from './resources.ts';
import { serviceRoutes } from './service.ts';
import { sessionRoutes } from './sessions.ts';
import { signInLinkRoutes } from './sign-in-links.ts';
import { sshKeyRoutes } from './ssh.ts';

/**
 * Every group of the API's routes, registered in one place; each takes what it needs from the
 * app's decorations. With a storage folder (where the drives live), the files API too.
 */
export const apiRoutes: ApiRoutes<{
  storageRoot?: string | undefined;
  quotas?: StorageQuotas | undefined;
}> = async (api, { storageRoot, quotas }) => {
  await api.register(serviceRoutes);
  await api.register(authRoutes);
  await api.register(signInLinkRoutes);
  await api.register(jobRoutes);
  await api.register(catalogRoutes);
  await api.register(accountingRoutes);
  await api.register(adminRoutes);
  await api.register(adminDirectoryRoutes);
  await api.register(sessionRoutes);
  await api.register(resourceRoutes);
  await api.register(sshKeyRoutes);
  if (storageRoot !== undefined) await api.register(fileRoutes, { storageRoot, quotas });
};
