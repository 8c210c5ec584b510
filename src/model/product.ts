import { type Static, Type } from '@sinclair/typebox';
import { UNITS_OF_PRICE } from './price-period.ts';
import { closed, StringEnum } from './schema.ts';

export const DEFAULT_PROVIDER = 'ucompute';

const Name = Type.String({
  pattern: '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$',
  description: 'a name of letters, digits, . _ -',
});

export const ProductReference = Type.Object(
  {
    id: Name,
    category: Name,
    provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  closed,
);
export type ProductReference = Static<typeof ProductReference>;

export const UnitOfPrice = StringEnum(UNITS_OF_PRICE);
export type UnitOfPrice = Static<typeof UnitOfPrice>;

/** What one unit is: a vCPU (UCloud's compute unit) or, for GPU products priced per card, a GPU. */
export const PricedPer = StringEnum(['vCPU', 'GPU']);

/** Kubernetes bandwidth quantities such as "10M" or "1G". */
const Bandwidth = Type.String({
  pattern: '^[0-9]+(\\.[0-9]+)?[kMGT]?$',
  description: 'a bandwidth such as 10M or 1G',
});
const LabelValue = Type.String({ maxLength: 63, pattern: '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$' });
const LabelKey = Type.String({
  maxLength: 253,
  pattern: '^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$',
});

/** A machine type, from the products configuration. */
export const Product = Type.Object(
  {
    id: Name,
    category: Name,
    cpu: Type.Integer({ minimum: 1, maximum: 4096 }),
    memoryInGigs: Type.Integer({ minimum: 1, maximum: 65536 }),
    gpu: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    pricePerUnit: Type.Integer({ minimum: 0, description: 'credits per unit per period' }),
    maxTimeAllocationHours: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        description: 'the longest time a job may have, extensions included',
      }),
    ),
    unitOfPrice: Type.Optional(UnitOfPrice),
    pricedPer: Type.Optional(PricedPer),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    /** Most processes of one replica (the local backend's pids cgroup); default `local.defaultPids`. */
    pids: Type.Optional(Type.Integer({ minimum: 16, maximum: 4_194_304 })),
    runtimeClass: Type.Optional(Type.String({ pattern: '^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$' })),
    // Closed: a Record with a key pattern otherwise lets non-matching keys (and their values) through.
    nodeSelector: Type.Optional(Type.Record(LabelKey, LabelValue, closed)),
    networkBandwidth: Type.Optional(
      Type.Object({ ingress: Type.Optional(Bandwidth), egress: Type.Optional(Bandwidth) }, closed),
    ),
  },
  closed,
);
export type Product = Static<typeof Product>;

export const ProductsDocument = Type.Object({ products: Type.Array(Product, { minItems: 1 }) }, closed);

export { periodMillis } from './price-period.ts';

/** Units a job of this product consumes per period: replicas × vCPU, or replicas × GPU for GPU-priced products. */
export function chargeUnits(product: Product, replicas: number): number {
  const perReplica = product.pricedPer === 'GPU' ? (product.gpu ?? 0) : product.cpu;
  return replicas * perReplica;
}
