import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { type Logger, pino } from 'pino';
import { chargePeriodProblem } from '../accounting/charges.ts';
import { dryBackend } from '../backends/dry/dry-backend.ts';
import { loadCatalog } from '../catalog/catalog.ts';
import { loadProducts } from '../catalog/products.ts';
import { type Config, POSTGRES_URL_PATTERN } from '../config/config.ts';
import { sessionRevocation } from '../interactive/sessions.ts';
import type { Backend } from '../jobs/backend.ts';
import { expiryWarnings } from '../jobs/expiry-warnings.ts';
import { quotaWatch } from '../jobs/quota-watch.ts';
import { resourceSampler, resourceSeriesCleanup } from '../jobs/resource-sampler.ts';
import { createJobService } from '../jobs/service.ts';
import { systemClock } from '../model/clock.ts';
import { resolvePipelineConfig } from '../model/config.ts';
import { ValidationError } from '../model/errors.ts';
import { accountOf } from '../model/owner.ts';
import { PLUGINS } from '../plugins/index.ts';
import { openProvider, type Provider } from '../provider/provider.ts';
import { buildServer } from '../server/app.ts';
import { isOrigin } from '../server/public-url.ts';
import { directoryStorage } from '../storage/directory.ts';
import type { JobStorage } from '../storage/job-storage.ts';
import { storageQuotas } from '../storage/quota.ts';
import { DEFAULT_TRASH_DAYS, trashPurge } from '../storage/trash.ts';
import { openStore } from '../store/open.ts';
import type { Store, Transactional } from '../store/store.ts';
import { parseCommandLine } from './args.ts';
import { reloadingCatalog } from './catalog-watch.ts';
import { loadConfig } from './config-file.ts';
import {
  ADMIN_TOKEN_FILE,
  ADMIN_USER,
  DEFAULT_PORT,
  defaultDataDir,
  EXAMPLE_APPS,
  EXAMPLE_PRODUCTS,
} from './defaults.ts';
import { CliError, isProgrammingError } from './errors.ts';
import { cliIo } from './io.ts';
import { DEFAULT_LEASE_SECONDS, DEFAULT_RENEW_SECONDS, replicaLeadership } from './replica-leadership.ts';
import { SERVE_USAGE } from './serve-usage.ts';

const YEAR = 365 * 24 * 3600 * 1000;

export async function serveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    {
      config: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'public-url': { type: 'string' },
      'data-dir': { type: 'string' },
      store: { type: 'string' },
      apps: { type: 'string', multiple: true },
      products: { type: 'string' },
      backend: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    SERVE_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${SERVE_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${SERVE_USAGE}`);
  const config = await loadConfig(values.config);
  const port = values.port !== undefined ? Number(values.port) : (config.server?.port ?? DEFAULT_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError('--port must be a port number');
  const host = values.host ?? config.server?.host ?? '127.0.0.1';
  const publicUrl = values['public-url'] ?? config.server?.publicUrl;
  if (publicUrl !== undefined && !isOrigin(publicUrl)) {
    throw new CliError(`--public-url must be an origin, http(s)://host[:port] without a path: ${publicUrl}`);
  }
  const dataDir = resolve(values['data-dir'] ?? config.dataDir ?? defaultDataDir());
  const postgresUrl = values.store ?? config.store?.postgres.url;
  if (postgresUrl !== undefined && !new RegExp(POSTGRES_URL_PATTERN).test(postgresUrl)) {
    throw new CliError('--store must be a postgres:// URL');
  }
  const leaseMs = (config.store?.postgres.leaseSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
  const renewMs = (config.store?.postgres.renewSeconds ?? DEFAULT_RENEW_SECONDS) * 1000;
  if (renewMs >= leaseMs) {
    throw new CliError('store.postgres.renewSeconds must be less than store.postgres.leaseSeconds');
  }
  const backendName = values.backend ?? config.backend ?? 'local';
  if (backendName !== 'dry' && backendName !== 'local' && backendName !== 'kubernetes') {
    throw new CliError('--backend must be dry, local or kubernetes');
  }

  // What is open, closed the last first: on SIGINT/SIGTERM, and when start-up fails, so that the
  // process ends then too.
  const opened: (() => unknown)[] = [];
  const closeAll = async () => {
    for (const close of opened.reverse()) await close();
  };
  // Ends serving: a signal (0), or a replica that lost the backend lease (1).
  let ended!: (code: number) => void;
  const exitCode = new Promise<number>((resolve) => {
    ended = resolve;
  });
  try {
    const appFolders = values.apps ?? [config.apps ?? EXAMPLE_APPS].flat();
    const [firstCatalog, products] = await Promise.all([
      loadCatalog(appFolders),
      loadProducts(values.products ?? config.products ?? EXAMPLE_PRODUCTS),
    ]);
    const chargePeriod = chargePeriodProblem(products, config.accounting?.chargePeriodMs, config.mode);
    if (chargePeriod !== undefined) throw new CliError(chargePeriod);
    await privateFolder(dataDir);
    const log = pino({ level: cliIo().env.UCOMPUTE_LOG_LEVEL ?? 'info' });
    const catalog = reloadingCatalog(firstCatalog, appFolders, log);
    opened.push(() => catalog.close());
    const store = await openStore(
      postgresUrl !== undefined
        ? { postgres: { url: postgresUrl } }
        : { sqlite: join(dataDir, 'ucompute.db') },
    );
    opened.push(() => store.close());
    const storageRoot = config.storage?.root ?? join(dataDir, 'storage');
    const storage = directoryStorage(storageRoot);
    const quotas = storageQuotas({
      root: storageRoot,
      now: Date.now,
      ...(config.storage?.quota ? { settings: config.storage.quota } : {}),
    });
    const trashDays = config.storage?.trashDays === undefined ? DEFAULT_TRASH_DAYS : config.storage.trashDays;
    const ucloud = config.mode === 'ucloud-provider' ? config.ucloud : undefined;
    if (config.mode === 'ucloud-provider' && !ucloud) {
      throw new CliError('mode ucloud-provider needs a `ucloud` section (see ucompute serve --help)');
    }
    const provider: Provider | undefined = ucloud
      ? await openProvider({ config: ucloud, store, log })
      : undefined;
    if (provider) opened.push(() => provider.stop());
    const env = {
      // Core resolves every job's application: the catalogue is what it sent.
      catalog: provider ? provider.catalog : catalog.catalog,
      products,
      config: resolvePipelineConfig(ucloud ? { ...config, provider: ucloud.providerId } : config, {
        // The local sandbox maps a container's root to an unprivileged host id; dry runs nothing.
        rootIsUnprivileged:
          backendName === 'dry' || (backendName === 'local' && config.local?.unsandboxed !== true),
      }),
    };

    const token = await bootstrapAdmin(
      store,
      dataDir,
      products.map((p) => p.category),
      config.accounting?.initialCredits,
    );
    await storage.ensureFolder(`/home/${ADMIN_USER}`);

    const { backend, about } = await makeBackend(
      backendName,
      config,
      dataDir,
      storageRoot,
      storage,
      log,
      values.config === undefined,
      host,
    );
    opened.push(() => backend.close());
    const service = createJobService({
      store,
      env,
      backend,
      plugins: [...PLUGINS, sessionRevocation(store), resourceSeriesCleanup(store)],
      storage,
      inputs: storage,
      quotas,
      log,
      // Core holds the owners' credits in provider mode: it answers each usage report.
      requireCredits: provider ? false : (config.accounting?.requireCredits ?? true),
      ...(provider ? { mirror: provider.mirror } : {}),
      ...(config.monitorIntervalMs !== undefined ? { monitorIntervalMs: config.monitorIntervalMs } : {}),
      replicated: postgresUrl !== undefined,
    });
    opened.push(() => service.stop());
    const app = await buildServer({
      service,
      store,
      env,
      backend,
      storageRoot,
      quotas,
      logger: log,
      resourceSampleMs: config.resourceSampleMs,
      ...(publicUrl !== undefined ? { publicUrl } : {}),
      ...(provider ? { provider: provider.mode(service, env, backend) } : {}),
    });
    opened.push(() => app.close());
    // The work done once, not by every replica: the backend loop, the live resource views'
    // samples, the Trash's purge, the warnings before a job's time runs out and the drives of
    // active jobs measured against their owners' quotas.
    const leaderWork = async (loopStore: Transactional, holds?: () => boolean) => {
      const stopLoop = await service.lead(loopStore, holds);
      const watches = [
        resourceSampler({ store: loopStore, backend, log, periodMs: config.resourceSampleMs }),
        quotaWatch({
          store: loopStore,
          quotas,
          addStatus: service.leader.addStatus,
          hold: service.leader.holdForQuota,
          release: service.leader.releaseFromQuota,
          log,
        }),
        ...(trashDays === null
          ? []
          : [trashPurge({ root: storageRoot, days: trashDays, clock: systemClock, log })]),
        expiryWarnings({
          store: loopStore,
          addStatus: service.leader.addStatus,
          log,
          ...(config.notifications?.expiryWarningMinutes !== undefined
            ? { warnBeforeMs: config.notifications.expiryWarningMinutes * 60_000 }
            : {}),
          ...(config.notifications?.webhook !== undefined ? { webhook: config.notifications.webhook } : {}),
        }),
      ];
      for (const watch of watches) watch.start();
      return async () => {
        for (const watch of watches) await watch.stop();
        await stopLoop();
      };
    };
    if (postgresUrl === undefined) {
      // SQLite: one process, its own leader.
      opened.push(await leaderWork(store));
    } else {
      const replicas = replicaLeadership({
        store,
        leaseMs,
        renewMs,
        log,
        lead: leaderWork,
        lost: () => {
          log.error('this replica lost the backend lease: it exits, to serve again as a follower');
          ended(1);
        },
      });
      replicas.start();
      opened.push(() => replicas.stop());
    }
    provider
      ?.start(service, env)
      .catch((err: unknown) => log.error({ err }, 'provider mode failed to start'));
    const address = await app.listen({ port, host }).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EADDRINUSE') throw e;
      throw new CliError(`${host}:${port} is in use (another ucompute serve?): choose another --port`, 1);
    });

    cliIo().stdout.write(
      `ucompute is serving on ${address} (backend ${backend.name}: ${about}; data in ${dataDir})\n` +
        `admin token: ${join(dataDir, ADMIN_TOKEN_FILE)}${token.created ? ' (new)' : ''}\n`,
    );
  } catch (error) {
    await closeAll().catch(() => {});
    throw startupError(error);
  }

  const stop = () => ended(0);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const code = await exitCode;
  await closeAll();
  return code;
}

/**
 * What a failed start-up tells the operator. The machine, the cluster or the configuration is at
 * fault far more often than ucompute: its message is enough, and a stack trace only buries it. A
 * programming error (a TypeError and its kind) keeps its stack, for the bug report.
 */
function startupError(error: unknown): unknown {
  if (error instanceof CliError || error instanceof ValidationError || isProgrammingError(error))
    return error;
  const e = error as NodeJS.ErrnoException;
  // reportError names the missing file.
  if (e?.code === 'ENOENT' && e.path) return error;
  return new CliError(`ucompute cannot start: ${e instanceof Error ? e.message : String(e)}`, 1);
}

async function makeBackend(
  name: 'dry' | 'local' | 'kubernetes',
  config: Config,
  dataDir: string,
  storageRoot: string,
  storage: JobStorage,
  log: Logger,
  embedded: boolean,
  /** The server's listen address: the local backend binds jobs' SSH ports there. */
  host: string,
): Promise<{ backend: Backend; about: string }> {
  if (name === 'dry') {
    const runForMs = config.dry?.runForMs;
    return { backend: dryBackend(runForMs !== undefined ? { runForMs } : {}), about: 'runs nothing' };
  }
  if (name === 'local') {
    // Loaded only here (~70 modules and node-pty's addon), which a dry or Kubernetes service never uses.
    const { openLocalBackend } = await import('../backends/local/open.ts');
    // Without bubblewrap (and no explicit `local.unsandboxed`), the service refuses to run jobs at all.
    const backend = await openLocalBackend({
      config: config.local ?? {},
      dataDir,
      storageRoot,
      storageClaim: resolvePipelineConfig(config).kubernetes.storageClaim,
      embedded,
      listen: host,
      log,
    }).catch((e: Error) => {
      throw new CliError(`the local backend cannot start: ${e.message}`, 1);
    });
    for (const w of backend.warnings) log.warn(`local backend: ${w}`);
    return { backend, about: backend.description };
  }
  // Loaded only here: client-node loads its whole generated API (≈78 MB of RSS), which a
  // local or dry service never uses.
  const { kubernetesBackend } = await import('../backends/kubernetes/kubernetes-backend.ts');
  try {
    const backend = kubernetesBackend({
      config: resolvePipelineConfig(config),
      settings: config.kubernetes,
      storage,
      log,
    });
    return { backend, about: backend.description };
  } catch (e) {
    throw new CliError((e as Error).message);
  }
}

/**
 * The embedded default user: an admin whose token lives in the data folder. A token file that
 * still matches is kept, so restarts do not break the CLI.
 */
async function bootstrapAdmin(
  store: Store,
  dataDir: string,
  categories: string[],
  initialCredits = 1_000_000,
): Promise<{ created: boolean }> {
  const now = Date.now();
  if (await store.users.createUser(ADMIN_USER, true, now)) {
    for (const category of new Set(categories)) {
      await store.accounting.grant(
        accountOf({ createdBy: ADMIN_USER }),
        category,
        initialCredits,
        now,
        now + YEAR,
      );
    }
  }
  const file = join(dataDir, ADMIN_TOKEN_FILE);
  const existing = await readFile(file, 'utf8').then(
    (t) => t.trim(),
    () => undefined,
  );
  if (existing !== undefined && (await store.users.userForToken(existing))?.name === ADMIN_USER) {
    return { created: false };
  }
  const token = await store.users.createToken(ADMIN_USER, 'admin token written by ucompute serve', now);
  // A new file, 0600 from its creation, then renamed over the old one: never readable by others.
  const fresh = `${file}.${process.pid}.tmp`;
  await writeFile(fresh, `${token}\n`, { mode: 0o600, flag: 'wx' });
  await rename(fresh, file);
  return { created: true };
}

/**
 * The data folder (database, admin token, jobs' state and logs) is ucompute's alone: created 0700,
 * and one an earlier version left open to others is closed.
 */
async function privateFolder(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const { mode } = await stat(dir);
  if ((mode & 0o077) !== 0) await chmod(dir, 0o700);
}
