import type { Product } from '../../src/model/product.ts';

/** One vCPU at 1 credit a minute: the accounting tests' product. */
export const PER_MINUTE: Product = {
  id: 'per-minute',
  category: 'per-minute',
  cpu: 1,
  memoryInGigs: 1,
  pricePerUnit: 1,
};
