/**
 * The checkout's folders, without any of ucompute's modules: a test that only needs a path (to run
 * `bin/ucompute.js`, to read an example) does not load the catalogue with test/support/fixtures.ts
 * (~0.35 CPU-s of module loading and YAML per test process).
 */
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const EXAMPLE_APPS = fileURLToPath(new URL('../../examples/apps', import.meta.url));
export const EXAMPLE_PRODUCTS = fileURLToPath(new URL('../../examples/products.yml', import.meta.url));
