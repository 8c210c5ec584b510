import type { Product, UnitOfPrice } from '../model/product.ts';
import { chargeUnits } from '../model/product.ts';

// Products as UCloud Core knows them: ProductV2 (SDU-eScience/UCloud `provider-integration/shared/
// pkg/accounting/products.go:212-237`), registered by the provider with `POST /api/products/v2`.

const FREQUENCY: Record<UnitOfPrice, string> = {
  CREDITS_PER_MINUTE: 'PERIODIC_MINUTE',
  CREDITS_PER_HOUR: 'PERIODIC_HOUR',
  CREDITS_PER_DAY: 'PERIODIC_DAY',
};

/**
 * A product as UCloud's ProductV2. The unit is ucompute's credit; the price is what one replica of
 * the product costs per period, as ucompute charges it (per vCPU, or per GPU, times the price).
 */
export function productV2(product: Product, provider: string) {
  return {
    type: 'compute',
    category: {
      name: product.category,
      provider,
      productType: 'COMPUTE',
      accountingUnit: {
        name: 'Credit',
        namePlural: 'Credits',
        floatingPoint: false,
        displayFrequencySuffix: false,
      },
      accountingFrequency: FREQUENCY[product.unitOfPrice ?? 'CREDITS_PER_MINUTE'],
      freeToUse: product.pricePerUnit === 0,
      allowSubAllocations: true,
    },
    name: product.id,
    description: product.description ?? `${product.cpu} vCPU, ${product.memoryInGigs} GB`,
    productType: 'COMPUTE',
    price: product.pricePerUnit * chargeUnits(product, 1),
    hiddenInGrantApplications: false,
    cpu: product.cpu,
    memoryInGigs: product.memoryInGigs,
    gpu: product.gpu ?? 0,
  };
}
export type ProductV2 = ReturnType<typeof productV2>;
