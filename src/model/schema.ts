import { type TLiteral, type TObject, type TUnion, Type } from '@sinclair/typebox';

/** A union of objects told apart by one literal field; our validator explains errors by that field. */
export function TaggedUnion<V extends TObject[]>(
  tag: string,
  variants: [...V],
  description?: string,
): TUnion<V> {
  return Type.Union(variants, { discriminator: tag, ...(description ? { description } : {}) }) as TUnion<V>;
}

/** A string enum as a union of literals (JSON Schema `anyOf` of `const`s). */
export function StringEnum<T extends string[]>(values: [...T], description?: string) {
  return Type.Union(
    values.map((v) => Type.Literal(v)) as { [K in keyof T]: TLiteral<T[K]> },
    description ? { description } : {},
  );
}

/** Objects we accept from outside are closed: an unknown field is an error, not silently dropped. */
export const closed = { additionalProperties: false } as const;
