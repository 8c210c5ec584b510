import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { inFile, ValidationError } from '../model/errors.ts';
import { type Product, ProductsDocument } from '../model/product.ts';
import { parser } from '../model/validate.ts';

const productsDocument = parser(ProductsDocument);

/** Parses a YAML `products: [...]` document; ids must be unique within a category. */
export function parseProducts(text: string, source = 'products'): Product[] {
  let raw: unknown;
  try {
    raw = parse(text, { uniqueKeys: true });
  } catch (e) {
    throw new ValidationError([
      { path: source, message: `is not valid YAML: ${(e as Error).message.split('\n')[0]}` },
    ]);
  }
  const { products } = productsDocument.parse(raw, '');
  const seen = new Set<string>();
  products.forEach((p, i) => {
    const key = `${p.id}/${p.category}`;
    if (seen.has(key))
      throw new ValidationError([{ path: `products[${i}].id`, message: `repeats product ${key}` }]);
    seen.add(key);
  });
  return products;
}

export async function loadProducts(path: string): Promise<Product[]> {
  const text = await readFile(path, 'utf8');
  try {
    return parseProducts(text, path);
  } catch (e) {
    throw e instanceof ValidationError && !e.issues.every((i) => i.path.startsWith(path))
      ? inFile(e, path)
      : e;
  }
}
