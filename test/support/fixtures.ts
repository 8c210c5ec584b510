/**
 * Shared test helpers: the example catalogue and products (loaded once per test process), the
 * default configuration, and `prepare`/`build` over a fixed job identity so that names are known.
 */
import { type Catalog, loadCatalog } from '../../src/catalog/catalog.ts';
import { loadProducts } from '../../src/catalog/products.ts';
import { buildJob } from '../../src/jobs/job-management.ts';
import { type JobEnvironment, prepareJob } from '../../src/jobs/prepare.ts';
import { type PipelineConfig, resolvePipelineConfig } from '../../src/model/config.ts';
import type { Product } from '../../src/model/product.ts';
import type { JobBuild, JobPlugin, PeerLocation, PreparedJob } from '../../src/plugins/plugin.ts';
import type { JobStorage } from '../../src/storage/job-storage.ts';
import { EXAMPLE_APPS, EXAMPLE_PRODUCTS } from './paths.ts';

export { EXAMPLE_APPS, EXAMPLE_PRODUCTS, ROOT } from './paths.ts';

// Each test file runs in its own process, so this loads once per file.
export const catalog: Catalog = await loadCatalog(EXAMPLE_APPS);
export const products: readonly Product[] = await loadProducts(EXAMPLE_PRODUCTS);
/**
 * The example catalogue's configuration: its mpi-hello runs as root, which the operator allows;
 * and no maximum time, so that tests' jobs may run without a limit while their clocks move days.
 */
export const EXAMPLE_CONFIG: PipelineConfig = {
  security: { allowRootApps: true },
  maxTimeAllocationHours: null,
};
export const config = resolvePipelineConfig(EXAMPLE_CONFIG);

export const JOB_ID = 'testjob1';
export const CREATED_AT = Date.UTC(2025, 0, 1);

/** The example catalogue and products with the given configuration (the defaults without one). */
export function env(overrides?: PipelineConfig): JobEnvironment {
  return {
    catalog,
    products,
    config: overrides ? resolvePipelineConfig({ ...EXAMPLE_CONFIG, ...overrides }) : config,
  };
}

/** An example product by id; throws for a typo rather than testing against undefined. */
export function product(id: string): Product {
  const found = products.find((p) => p.id === id);
  if (!found) throw new Error(`no example product ${id}`);
  return found;
}

export interface PrepareOptions {
  user?: string;
  project?: string;
  /** The drives the creator may use (default: the owner's drive). */
  drives?: readonly string[];
  id?: string;
  config?: PipelineConfig;
  catalog?: Catalog;
}

export function prepare(spec: unknown, opts: PrepareOptions = {}): PreparedJob {
  const owner = {
    createdBy: opts.user ?? 'alice',
    ...(opts.project !== undefined ? { project: opts.project } : {}),
  };
  const environment = { ...env(opts.config), ...(opts.catalog ? { catalog: opts.catalog } : {}) };
  return prepareJob(
    spec,
    { id: opts.id ?? JOB_ID, owner, createdAt: CREATED_AT, ...(opts.drives ? { drives: opts.drives } : {}) },
    environment,
  );
}

export interface BuildOptions extends PrepareOptions {
  peers?: ReadonlyMap<string, PeerLocation>;
  storage?: JobStorage;
  plugins?: readonly JobPlugin[];
}

/** Prepares and builds a job through the plugin pipeline (all plugins unless `plugins` is given). */
export async function build(spec: unknown, opts: BuildOptions = {}): Promise<JobBuild> {
  const job = prepare(spec, opts);
  const ctx = {
    config: env(opts.config).config,
    peers: opts.peers ?? new Map<string, PeerLocation>(),
    ...(opts.storage ? { storage: opts.storage } : {}),
  };
  return opts.plugins ? buildJob(job, ctx, opts.plugins) : buildJob(job, ctx);
}
