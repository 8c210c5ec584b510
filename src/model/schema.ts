import { type TLiteral, type TObject, type TUnion, Type } from '@sinclair/typebox';

/** A union of objects told apart by one literal field; our validator explains errors by that field. */
export function TaggedUnion<V extends TObject[]>(
  tag: string,
  variants: [...V],
  description?: string,
): TUnion<V> {
  return Type.Union(variants, { discriminator: tag, ...(description ? { description } : {}) }) as TUnion<V>;
}

type Literals<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> } & TLiteral[];

/**
 * A string enum as a union of literals (JSON Schema `anyOf` of `const`s). `const T` keeps the
 * names, so the static type is their union rather than `string`.
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  description?: string,
): TUnion<Literals<T>> {
  const literals = values.map((v) => Type.Literal(v));
  return Type.Union(literals, description ? { description } : {}) as unknown as TUnion<Literals<T>>;
}

/** Objects we accept from outside are closed: an unknown field is an error, not silently dropped. */
export const closed = { additionalProperties: false } as const;
