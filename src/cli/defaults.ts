import { fileURLToPath } from 'node:url';

/** The example catalogue and products shipped with ucompute: the embedded defaults. */
export const EXAMPLE_APPS = fileURLToPath(new URL('../../examples/apps', import.meta.url));
export const EXAMPLE_PRODUCTS = fileURLToPath(new URL('../../examples/products.yml', import.meta.url));
